#!/bin/bash
# Device call 6 (1 H200): the bf16 statistics pass folding shifted sums instead of Welford (B)
# against main 8ca9026 (A): dtrain-models-gpu-tests with B's kernels (the float64-reference batch
# norm tests among them), the A/B of dtrain-bench-train (3 rounds), and ncu sections of B's
# statistics pass for one step (as call 5 for A).
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
SECONDS=0
B=/tmp/b; mkdir -p $B; tar xJf .device/s27/p6.tar.xz -C $B
nvidia-smi -L > $OUT/machine.txt
DTRAIN_REQUIRE_GPU=1 timeout 150 $B/dtrain-models-gpu-tests > $OUT/models_gpu_tests.log 2>&1
echo "dtrain-models-gpu-tests rc $? at $SECONDS s: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/models_gpu_tests.log | tr '\n' ' ')"
grep -E "^\[  FAILED" $OUT/models_gpu_tests.log | head
OUT=$OUT/ab DTRAIN_PLAN_CACHE=/tmp/plans bench/run_gpu_train_ab.sh $B/base-dtrain-bench-train $B/new-dtrain-bench-train 3 | tail -1
echo "ab done at $SECONDS s"
DTRAIN_CUDA_GRAPHS=0 DTRAIN_PLAN_CACHE=/tmp/plans timeout 150 ncu --kernel-name-base function --kernel-name 'regex:^partial_moments_kernel$' \
  --launch-skip 53 --launch-count 53 --cache-control none --clock-control none \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --csv --page details $B/new-dtrain-bench-train --precision bf16 --batch-per-rank 256 --timing-warmup-steps 1 --steps 2 \
  > /tmp/ncu6.csv 2> /tmp/ncu.err; echo "ncu rc $? at $SECONDS s"
xz -9 -c /tmp/ncu6.csv > $OUT/ncu_stats_B.csv.xz
rm -rf $OUT/ab/plan_cache; tar czf $OUT/ab.tgz -C $OUT ab && rm -rf $OUT/ab
