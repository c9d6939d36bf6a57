#!/bin/bash
# Device call 1 (1 H200): the BN finalize kernels with their loads in flight and the stem pool's
# 32-bit index math (B) against main 596ad21 (A): dtrain-bench-train ResNet-50 bf16 b256, graphs
# on, 3 interleaved rounds; torch.compile in the same call; then ncu per launch of B's own kernels
# (1 warm-up + 2 steps, caches not flushed) for the per-layer table.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
SECONDS=0
B=/tmp/b; mkdir -p $B; tar xJf .device/s27/ab.tar.xz -C $B
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; echo "nproc $(nproc)"; } | tee $OUT/machine.txt
OUT=$OUT/ab DTRAIN_PLAN_CACHE=/tmp/plans bench/run_gpu_train_ab.sh $B/base-dtrain-bench-train $B/new-dtrain-bench-train 3
echo "ab done at $SECONDS s"
timeout 200 /opt/torch/.venv/bin/python bench/peers/pytorch_resnet50.py --precision bf16 --batch 256 --mode compile \
  --json $OUT/peer_compile.json > $OUT/peer_compile.log 2>&1; echo "peer rc $? at $SECONDS s"; tail -3 $OUT/peer_compile.log
OURS='regex:^(apply_vec|backward_apply_vec|backward_partials_vec|finalize_backward|finalize_forward|max_pool_backward_vec|max_pool_forward_vec|partial_moments_vec|widen)_kernel$'
DTRAIN_PLAN_CACHE=/tmp/plans timeout 150 ncu --kernel-name-base function --kernel-name "$OURS" --cache-control none --clock-control none \
  --metrics gpu__time_duration.sum,dram__bytes.sum --csv $B/new-dtrain-bench-train --precision bf16 --batch-per-rank 256 \
  --timing-warmup-steps 1 --steps 2 > /tmp/ncu.csv 2> /tmp/ncu.err; echo "ncu rc $? at $SECONDS s"
tail -3 /tmp/ncu.err; xz -c /tmp/ncu.csv > $OUT/ncu_new.csv.xz
rm -rf $OUT/ab/plan_cache; tar czf $OUT/logs.tgz -C $OUT ab peer_compile.log && rm -rf $OUT/ab
