#!/bin/bash
# Session 28 call 2 (nvidia-h200-x2): dtrain-bench-train ResNet-50 bf16 b256, graphs on.
# (1) 1 GPU A/B, 2 interleaved rounds: main 8498510 (A) vs combo 335fb71 (B: pool_split + stats_sums);
# (2) 2 simulated nodes x 1 GPU (combo): auto (the flat mpi-ring now) vs hierarchical, bf16 wire, 2 rounds;
# (3) torch.compile on 1 GPU in the same call.
set -u; SECONDS=0
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/d; [ -x /tmp/d/bin/dtrain-bench-train ] || tar xJf .device/s28/payload.tar.xz -C /tmp/d
xz -dc .device/s28/base-dtrain-bench-train.xz > /tmp/base-dtrain-bench-train; chmod +x /tmp/base-dtrain-bench-train
{ nvidia-smi -L; echo "nproc $(nproc)"; } > $OUT/machine.txt 2>&1
S=$OUT/summary.txt; T=/tmp/t2; mkdir -p $T; echo "setup $SECONDS s" > $S
export DTRAIN_PLAN_CACHE=/tmp/plans2
OUT=$T/ab bench/run_gpu_train_ab.sh /tmp/base-dtrain-bench-train /tmp/d/bin/dtrain-bench-train 2 > $T/ab.txt 2>&1
tail -6 $T/ab.txt >> $S; echo "ab done at $SECONDS s" >> $S
MPI="mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_MPI_DEVICE_POINTERS=stage -x DTRAIN_PLAN_CACHE"
bt() { local name=$1 np=$2 rpn=$3; shift 3
  timeout 120 $MPI -np $np $rpn /tmp/d/bin/dtrain-bench-train --precision bf16 --batch-per-rank 256 --timing-warmup-steps 10 \
    --steps 30 --world-sizes $np --metrics-file $T/train_$name.json "$@" > $T/train_$name.log 2>&1
  echo "train_$name rc $? at $SECONDS s: $(grep -h 'img/s' $T/train_$name.log | tail -1)" >> $S; }
L="-x DTRAIN_RANKS_PER_NODE=1"
for r in 1 2; do
  [ $SECONDS -lt 420 ] && bt 2x1_auto_r$r 2 "$L" --gradient-wire-dtype auto
  [ $SECONDS -lt 420 ] && bt 2x1_hier_bf16_r$r 2 "$L" --backend hierarchical --gradient-wire-dtype bf16
done
grep -h "communicator:" $T/train_2x1_auto_r1.log | head -1 >> $S
left=$((585 - SECONDS)); [ $left -gt 150 ] || left=150
timeout $left /opt/torch/.venv/bin/python bench/peers/pytorch_resnet50.py --precision bf16 --batch 256 --mode compile \
  --json $T/peer_compile.json > $T/peer_compile.log 2>&1; echo "peer rc $? at $SECONDS s: $(tail -1 $T/peer_compile.log)" >> $S
rm -rf $T/ab/plan_cache; tar czf $OUT/logs.tgz -C /tmp t2
cat $S
