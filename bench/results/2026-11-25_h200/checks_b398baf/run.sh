#!/bin/bash
# Device run at b398baf on one H200: scripts/gpu_checks.sh (the GPU suites x3, accumulation, sync
# BN, timeline, torchvision weights, the multi-node training / fault / rank-equivalence tests with 2
# ranks as 2 simulated nodes sharing the GPU, Fashion-MNIST on one GPU), then dtrain-bench-train
# bf16 b256 (benchmark-only path) beside torch.compile in the same call.
# Binaries carried xz'd in .carry/bin, Fashion-MNIST in .carry/fmnist.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/b
for f in .carry/bin/*.xz; do (xz -dc "$f" > /tmp/b/$(basename "$f" .xz) && chmod +x /tmp/b/$(basename "$f" .xz)) & done; wait
nvidia-smi -L | tee $OUT/gpu.txt
SECONDS=0
OUT=$OUT/gpu_checks BIN=/tmp/b timeout 420 scripts/gpu_checks.sh .carry/fmnist 2>&1 | tee $OUT/gpu_checks_summary.txt
echo "gpu_checks took $SECONDS s" | tee -a $OUT/gpu_checks_summary.txt
rm -rf $OUT/gpu_checks/tensorboard $OUT/gpu_checks/timeline $OUT/gpu_checks/torchvision; tar czf $OUT/gpu_checks_logs.tgz -C $OUT gpu_checks && rm -rf $OUT/gpu_checks
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
$MPI -np 1 /tmp/b/dtrain-bench-train --precision bf16 --batch-per-rank 256 --timing-warmup-steps 15 --steps 40 --world-sizes 1 --metrics-file $OUT/bench_train.json 2>&1 | grep -v " INFO " | tail -1 | tee -a $OUT/bench.txt
timeout 100 /opt/torch/.venv/bin/python bench/peers/pytorch_resnet50.py --batch-per-rank 256 --precision bf16 --mode compile --metrics-file $OUT/peer_compile.json 2>&1 | tail -1 | tee -a $OUT/bench.txt
