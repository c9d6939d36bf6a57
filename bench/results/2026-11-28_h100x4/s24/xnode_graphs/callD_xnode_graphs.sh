#!/bin/bash
# Session 24 call D (x4): branch graphs_staged's dtrain-bench-train (.device/s24/graphs_payload.tar.xz) across simulated
# nodes with CUDA graphs (the branch's default) against DTRAIN_CUDA_GRAPHS=0, interleaved: 1 GPU, 4 GPUs nccl, 2x2
# hierarchical (default wire), 4x1 staged mpi-ring bf16 / fp32; then torch.compile on 1 GPU (issues 36 and 38's bars).
set -u; SECONDS=0; END=585
mkdir -p /tmp/g; [ -x /tmp/g/bin/dtrain-bench-train ] || tar xJf .device/s24/graphs_payload.tar.xz -C /tmp/g
nvidia-smi -L > $OUT/machine.txt
S=$OUT/summary.txt; T=/tmp/s24d; mkdir -p $T
PY=/opt/torch/.venv/bin/python
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib NCCL_NVLS_ENABLE=0 DTRAIN_MPI_DEVICE_POINTERS=stage DTRAIN_PLAN_CACHE=/tmp/plans
MPI=(mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_MPI_DEVICE_POINTERS -x DTRAIN_PLAN_CACHE)
bt() {  # bt NAME GRAPHS NP RPN ARGS...
  local name=$1 g=$2 np=$3 rpn=$4; shift 4
  [ $((SECONDS + 40)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  local lay=(); [ "$rpn" = - ] || lay=(-x DTRAIN_RANKS_PER_NODE=$rpn)
  timeout -k 5 120 "${MPI[@]}" -np $np "${lay[@]}" -x DTRAIN_CUDA_GRAPHS=$g /tmp/g/bin/dtrain-bench-train --precision bf16 \
    --batch-per-rank 256 --timing-warmup-steps 10 --steps 30 --world-sizes $np --metrics-file $T/$name.json "$@" > $T/$name.log 2>&1
  echo "$name rc $? $(awk -v n=$np '$1 == n && $2 ~ /^[0-9.]+$/ {print $2, "img/s/GPU peak", $7}' $T/$name.log | tail -1) | $(grep -h 'CUDA graphs' $T/$name.log | tail -1 | cut -c1-90) secs $SECONDS" >> $S
}
bt warm_1gpu 1 1 -   # measures the cuDNN plans once (kept in /tmp/plans)
for r in 1 2; do
  bt g0_1gpu_r$r 0 1 -
  bt g1_1gpu_r$r 1 1 -
  bt g0_2x2_r$r 0 4 2 --backend hierarchical
  bt g1_2x2_r$r 1 4 2 --backend hierarchical
done
bt g0_4nccl 0 4 - --backend nccl
bt g1_4nccl 1 4 - --backend nccl
bt g0_4x1_ring_bf16 0 4 1 --backend mpi-ring --gradient-wire-dtype bf16
bt g1_4x1_ring_bf16 1 4 1 --backend mpi-ring --gradient-wire-dtype bf16
bt g1_4x1_ring_fp32 1 4 1 --backend mpi-ring --gradient-wire-dtype fp32
[ $((SECONDS + 100)) -lt $END ] && { timeout 150 $PY bench/peers/pytorch_resnet50.py --precision bf16 --batch-per-rank 256 --mode compile \
  --timing-warmup-steps 15 --steps 30 --metrics-file $T/peer_compile.json > $T/peer_compile.log 2>&1
  echo "peer compile rc $? $(grep -h 'img/s' $T/peer_compile.log | tail -1) secs $SECONDS" >> $S; }
tar czf $OUT/logs.tgz -C /tmp s24d
cat $S
