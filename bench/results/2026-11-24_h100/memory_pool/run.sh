#!/bin/bash
# Backward's input gradients released once consumed (one live set instead of one per layer) and the
# 8-channel max-pool kernels: the GPU layer and step tests, Fashion-MNIST on one GPU (top-1 >= 88% at
# epoch 2), dtrain-bench-train bf16 b256 and fp32 b128, dtrain-train on synthetic data, with
# PyTorch torch.compile and eager in the same call.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/b
for f in .carry/bin/*.xz; do (xz -dc "$f" > /tmp/b/$(basename "$f" .xz) && chmod +x /tmp/b/$(basename "$f" .xz)) & done; wait
nvidia-smi -L | tee $OUT/gpu.txt
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
(timeout 300 /tmp/b/dtrain-models-gpu-tests 2>&1 | grep -E "FAILED|PASSED|Failure|error" | head -30) > $OUT/models_gpu_tests.txt; tail -3 $OUT/models_gpu_tests.txt
(timeout 300 /tmp/b/dtrain-train-gpu-tests 2>&1 | grep -E "FAILED|PASSED|Failure|error" | head -30) > $OUT/train_gpu_tests.txt; tail -3 $OUT/train_gpu_tests.txt
for p in "bf16 256" "fp32 128"; do set -- $p
  $MPI -np 1 /tmp/b/dtrain-bench-train --precision $1 --batch-per-rank $2 --timing-warmup-steps 15 --steps 40 --world-sizes 1 --metrics-file $OUT/bench_$1.json 2>&1 | grep -v " INFO " | tail -2 | tee -a $OUT/bench.txt
done
$MPI -np 1 /tmp/b/dtrain-train --dataset synthetic --device gpu --batch-per-rank 256 --synthetic-samples 12800 --epochs 1 --max-total-steps 60 --log-every-steps 20 --max-validation-batches 2 --run-dir /tmp/train_run 2>&1 | grep -E "step|summary|epoch 0:" | tee -a $OUT/bench.txt
P=/opt/torch/.venv/bin/python
$P bench/peers/pytorch_resnet50.py --batch-per-rank 256 --precision bf16 --mode compile --metrics-file $OUT/peer_compile.json 2>&1 | tail -1 | tee -a $OUT/bench.txt
$P bench/peers/pytorch_resnet50.py --batch-per-rank 256 --precision bf16 --mode eager --metrics-file $OUT/peer_eager.json 2>&1 | tail -1 | tee -a $OUT/bench.txt
$P bench/peers/pytorch_resnet50.py --batch-per-rank 128 --precision fp32 --mode eager --metrics-file $OUT/peer_fp32_eager.json 2>&1 | tail -1 | tee -a $OUT/bench.txt
$MPI -np 1 /tmp/b/dtrain-train --config configs/fashion_mnist_resnet.pbtxt --data_dir .carry/fmnist --device gpu --batch_per_rank 64 --log_every_steps 400 --run-dir /tmp/fm > $OUT/fashion_mnist_gpu.log 2>&1
grep -h "epoch .*top-1\|GPU memory\|summary:" $OUT/fashion_mnist_gpu.log | tail -4
