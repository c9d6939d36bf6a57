#!/bin/bash
# Session 22 call C (x4): the ring's waits A/B on the GPU path: main's binaries (yield, nap once a yield ran long) against
# the fix (nap only once a yield ran another thread), interleaved, dtrain-bench-train bf16 b256; then Fashion-MNIST
# 15 epochs 2x2 default vs 4 GPUs nccl with the fix.
set -u; SECONDS=0; END=480
mkdir -p /tmp/d /tmp/n /tmp/fm; [ -x /tmp/d/bin/dtrain-bench-train ] || tar xJf .device/payload.tar.xz -C /tmp/d
tar xJf .device/s22/new.tar.xz -C /tmp/n; [ -d /tmp/fm/fmnist ] || tar xJf .device/fmnist.tar.xz -C /tmp/fm
S=$OUT/summary.txt; T=/tmp/tc; mkdir -p $T
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib NCCL_NVLS_ENABLE=0 DTRAIN_MPI_DEVICE_POINTERS=stage DTRAIN_PLAN_CACHE=/tmp/plans
MPI=(mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_MPI_DEVICE_POINTERS -x DTRAIN_PLAN_CACHE)
bt() {  # bt NAME BINDIR NP RPN ARGS...
  local name=$1 dir=$2 np=$3 rpn=$4; shift 4
  [ $((SECONDS + 40)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  local lay=(); [ "$rpn" = - ] || lay=(-x DTRAIN_RANKS_PER_NODE=$rpn)
  timeout -k 5 120 "${MPI[@]}" -np $np "${lay[@]}" $dir/dtrain-bench-train --precision bf16 --batch-per-rank 256 --timing-warmup-steps 10 \
    --steps 30 --world-sizes $np --metrics-file $T/$name.json "$@" > $T/$name.log 2>&1
  echo "$name rc $? $(awk -v n=$np '$1 == n && $2 ~ /^[0-9.]+$/ {print $2}' $T/$name.log | tail -1) img/s/GPU secs $SECONDS" >> $S
}
bt new_1gpu /tmp/n 1 -
for r in 1 2; do
  bt old_2x2_default_r$r /tmp/d/bin 4 2 --backend hierarchical
  bt new_2x2_default_r$r /tmp/n 4 2 --backend hierarchical
  bt old_4x1_ring_bf16_r$r /tmp/d/bin 4 1 --backend mpi-ring --gradient-wire-dtype bf16
  bt new_4x1_ring_bf16_r$r /tmp/n 4 1 --backend mpi-ring --gradient-wire-dtype bf16
  bt old_4x1_ring_fp32_r$r /tmp/d/bin 4 1 --backend mpi-ring --gradient-wire-dtype fp32
  bt new_4x1_ring_fp32_r$r /tmp/n 4 1 --backend mpi-ring --gradient-wire-dtype fp32
done
bt new_1gpu_r2 /tmp/n 1 -
cat $S
FM=(--config configs/fashion_mnist_resnet.pbtxt --data_dir /tmp/fm/fmnist --epochs 15 --batch_per_rank 16 --log_every_steps 0 --device gpu)
for cfg in "fmnist_2x2 2" "fmnist_4gpu_nccl -"; do
  set -- $cfg; lay=(); [ "$2" = - ] && lay=(--backend nccl) || lay=(-x DTRAIN_RANKS_PER_NODE=$2)
  [ $((SECONDS + 60)) -lt 590 ] || { echo "$1 skipped (time)" >> $S; continue; }
  if [ "$2" = - ]; then timeout -k 5 $((590 - SECONDS)) "${MPI[@]}" -np 4 /tmp/n/dtrain-train "${FM[@]}" --backend nccl --metrics_file $T/$1.jsonl --run-dir /tmp/runs/$1 > $T/$1.log 2>&1
  else timeout -k 5 $((590 - SECONDS)) "${MPI[@]}" -np 4 -x DTRAIN_RANKS_PER_NODE=2 /tmp/n/dtrain-train "${FM[@]}" --metrics_file $T/$1.jsonl --run-dir /tmp/runs/$1 > $T/$1.log 2>&1; fi
  echo "$1 rc $? $(grep -o '"test_top1[^,]*' $T/$1.jsonl | tail -1) secs $SECONDS" >> $S
  tar czf $OUT/logs.tgz -C /tmp tc
done
tar czf $OUT/logs.tgz -C /tmp tc
cat $S
