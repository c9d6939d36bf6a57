#!/bin/bash
# Convolutions through cuDNN's graph API with measured plans: the GPU layer and step tests, then
# dtrain-bench-train bf16 b256 (debug log: each layer's chosen engine and time) and fp32 b128,
# with PyTorch torch.compile and eager in the same call.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/b
for f in .carry/bin/*.xz; do (xz -dc "$f" > /tmp/b/$(basename "$f" .xz) && chmod +x /tmp/b/$(basename "$f" .xz)) & done; wait
nvidia-smi -L | tee $OUT/gpu.txt
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_LOG_LEVEL"
(timeout 300 /tmp/b/dtrain-models-gpu-tests 2>&1 | tail -40) > $OUT/models_gpu_tests.txt; tail -5 $OUT/models_gpu_tests.txt
(timeout 300 /tmp/b/dtrain-train-gpu-tests 2>&1 | tail -40) > $OUT/train_gpu_tests.txt; tail -5 $OUT/train_gpu_tests.txt
export DTRAIN_LOG_LEVEL=debug
$MPI -np 1 /tmp/b/dtrain-bench-train --precision bf16 --batch-per-rank 256 --timing-warmup-steps 15 --steps 40 --world-sizes 1 --metrics-file $OUT/bench_bf16.json > $OUT/bench_bf16.log 2>&1
grep -v " DEBUG \| INFO " $OUT/bench_bf16.log | tail -8
export DTRAIN_LOG_LEVEL=info
$MPI -np 1 /tmp/b/dtrain-bench-train --precision fp32 --batch-per-rank 128 --timing-warmup-steps 15 --steps 40 --world-sizes 1 --metrics-file $OUT/bench_fp32.json 2>&1 | grep -v " INFO " | tail -6 | tee $OUT/bench_fp32.txt
P=/opt/torch/.venv/bin/python
$P bench/peers/pytorch_resnet50.py --batch-per-rank 256 --precision bf16 --mode compile --metrics-file $OUT/peer_compile.json 2>&1 | tail -3
$P bench/peers/pytorch_resnet50.py --batch-per-rank 128 --precision fp32 --mode eager --metrics-file $OUT/peer_fp32_eager.json 2>&1 | tail -3
