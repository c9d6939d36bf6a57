#!/bin/bash
# Session 20 call 3 (x4): all-reduce curves for dtrain-project; dtrain.torch CPU all-reduce vs gloo (shared memory on);
# 4x1 ring bf16 and 2x2 default (bench-train); dtrain.torch vs DDP under torch.compile on 4 GPUs.
set -u; SECONDS=0
mkdir -p /tmp/d; [ -x /tmp/d/bin/dtrain-bench-train ] || tar xJf .device/payload.tar.xz -C /tmp/d
{ nvidia-smi -L; echo "nproc $(nproc)"; lscpu | grep -i "model name\|flags" | cut -c1-2000; } > $OUT/machine.txt 2>&1
S=$OUT/summary.txt; P=/tmp/prof; mkdir -p $P
BIN=/tmp/d/bin OUT=$P timeout 200 bash bench/run_gpu_profile.sh curves > $P/run_curves.txt 2>&1
echo "curves rc $? secs $SECONDS" >> $S; cat $P/steps.txt >> $S
PY=/opt/torch/.venv/bin/python
C=/tmp/cpu; mkdir -p $C
CUDA_VISIBLE_DEVICES= PY=$PY OUT=$C DTRAIN_LIBRARY=/tmp/d/lib/libdtrain.so.1 timeout 150 bash bench/torch/run_cpu.sh 2 > $C/run.log 2>&1
echo "cpu rc $? secs $SECONDS" >> $S
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib NCCL_NVLS_ENABLE=0 DTRAIN_PLAN_CACHE=/tmp/plans
V=/tmp/v; mkdir -p $V
for cfg in "ring_bf16_4x1 1 --backend mpi-ring --gradient-wire-dtype bf16" "default_2x2 2 --backend hierarchical"; do
  set -- $cfg; name=$1 rpn=$2; shift 2
  timeout 60 mpirun --allow-run-as-root --bind-to none -np 4 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_PLAN_CACHE \
    -x DTRAIN_MPI_DEVICE_POINTERS=stage -x DTRAIN_RANKS_PER_NODE=$rpn /tmp/d/bin/dtrain-bench-train --precision bf16 --batch-per-rank 256 \
    --timing-warmup-steps 10 --steps 30 --world-sizes 4 --metrics-file $V/$name.json "$@" > $V/$name.log 2>&1
  echo "$name rc $? $(awk '$1 == 4 && $2 ~ /^[0-9.]+$/ {print $2}' $V/$name.log | tail -1) img/s/GPU secs $SECONDS" >> $S
done
T=/tmp/t; mkdir -p $T
export DTRAIN_LIBRARY=/tmp/d/lib/libdtrain.so.1 PYTHONPATH=$PWD/python PYTHONDONTWRITEBYTECODE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
for mode in dtrain-compile ddp-compile; do
  [ $((SECONDS + 100)) -lt 590 ] || { echo "$mode skipped (time)" >> $S; continue; }
  timeout -k 5 $((588 - SECONDS)) mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_LIBRARY -x PYTHONPATH \
    -x PYTHONDONTWRITEBYTECODE -x TORCHINDUCTOR_CACHE_DIR -np 4 $PY bench/torch/train_resnet.py --mode $mode --json $T/$mode.json \
    --steps 40 --warmup 15 > $T/$mode.log 2>&1
  echo "$mode rc $? $(grep -h 'images/s per GPU' $T/$mode.log | tail -1) secs $SECONDS" >> $S
done
tar czf $OUT/logs.tgz --exclude='*.bin' -C /tmp prof cpu v t
cat $S; tail -14 $C/summary.txt
