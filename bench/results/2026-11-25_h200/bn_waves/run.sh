#!/bin/bash
# BN kernels in one wave (grids sized by occupancy), coefficients kept in registers, 32-bit NCHW
# index math: three builds of dtrain-bench-train in one call. v0 = main at 26f6e87; v1 = one-wave
# grids + coefficients hoisted + 32-bit index math; v2 = v1 with the coefficients reloaded every
# iteration. The GPU model tests on v1's code, PyTorch compile/eager peers, ncu of v1's BN kernels.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/b
for f in .carry/bin/*.xz; do (xz -dc "$f" > /tmp/b/$(basename "$f" .xz) && chmod +x /tmp/b/$(basename "$f" .xz)) & done; wait
nvidia-smi -L | tee $OUT/gpu.txt
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
VERDICT='^\[  (PASSED|FAILED) |^\[==========\]|FAILED'
timeout 200 /tmp/b/dtrain-models-gpu-tests > /tmp/models.log 2>&1; echo "rc $?" >> /tmp/models.log
grep -E "$VERDICT|^rc" /tmp/models.log | tee $OUT/models_gpu_tests.txt
bench() {  # bench VARIANT PRECISION BATCH ROUND
  $MPI -np 1 /tmp/b/bench-$1 --precision $2 --batch-per-rank $3 --timing-warmup-steps 15 --steps 40 --world-sizes 1 --metrics-file $OUT/bench_$1_$2_$4.json 2>&1 | grep -v " INFO " | tail -1 | sed "s/^/$1 $2 b$3 round $4: /" | tee -a $OUT/bench.txt
}
for v in v0 v1 v2; do bench $v bf16 256 1; bench $v fp32 128 1; done
P=/opt/torch/.venv/bin/python
$P bench/peers/pytorch_resnet50.py --batch-per-rank 256 --precision bf16 --mode compile --metrics-file $OUT/peer_compile.json 2>&1 | tail -1 | tee -a $OUT/bench.txt
$P bench/peers/pytorch_resnet50.py --batch-per-rank 128 --precision fp32 --mode eager --metrics-file $OUT/peer_fp32.json 2>&1 | tail -1 | tee -a $OUT/bench.txt
for v in v2 v1 v0; do bench $v bf16 256 2; done
BN='regex:^(apply|apply_vec|backward_apply|backward_apply_vec|backward_partials|backward_partials_vec|finalize_backward|finalize_forward|partial_moments|partial_moments_vec)_kernel$'
for v in v1; do
  timeout 90 ncu --kernel-name-base function --kernel-name "$BN" --cache-control none --clock-control none \
    --metrics gpu__time_duration.sum --csv /tmp/b/bench-$v --precision bf16 --batch-per-rank 256 \
    --timing-warmup-steps 1 --steps 1 > /tmp/ncu_$v.csv 2> /tmp/ncu_$v.err; echo "ncu $v rc $?"; xz -c /tmp/ncu_$v.csv > $OUT/ncu_bn_$v.csv.xz
done
