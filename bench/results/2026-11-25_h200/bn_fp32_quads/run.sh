#!/bin/bash
# fp32 NCHW batch norm, 4 positions of a channel per load (models/cuda/batch_norm_fp32_nchw.cuh):
# v5 = b398baf + that path; v4 = b398baf. Same call: the GPU model tests on v5's code,
# dtrain-bench-train fp32 b128 (interleaved v4, v5, v5, v4) and bf16 b256 (v5), PyTorch eager fp32
# b128. Everything is tarred at the end.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
R=/tmp/results; mkdir -p /tmp/b $R
for f in .carry/bin/*.xz; do (xz -dc "$f" > /tmp/b/$(basename "$f" .xz) && chmod +x /tmp/b/$(basename "$f" .xz)) & done; wait
nvidia-smi -L | tee $R/gpu.txt
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
timeout 150 /tmp/b/dtrain-models-gpu-tests > $R/models_gpu_tests.log 2>&1; echo "rc $?" >> $R/models_gpu_tests.log
grep -E '^\[  (PASSED|FAILED) |^\[==========\]|FAILED|^rc' $R/models_gpu_tests.log | tee $R/tests.txt
bench() {  # bench VARIANT PRECISION BATCH ROUND
  $MPI -np 1 /tmp/b/bench-$1 --precision $2 --batch-per-rank $3 --timing-warmup-steps 15 --steps 40 --world-sizes 1 --metrics-file $R/bench_$1_$2_$4.json 2>&1 | grep -v " INFO " | tail -1 | sed "s/^/$1 $2 b$3 round $4: /" | tee -a $R/bench.txt
}
bench v4 fp32 128 1; bench v5 fp32 128 1
/opt/torch/.venv/bin/python bench/peers/pytorch_resnet50.py --batch-per-rank 128 --precision fp32 --mode eager --metrics-file $R/peer_fp32.json 2>&1 | tail -1 | tee -a $R/bench.txt
bench v5 fp32 128 2; bench v4 fp32 128 2
bench v5 bf16 256 1
cp $R/bench.txt $R/tests.txt $OUT/; tar czf $OUT/results.tgz -C /tmp results
