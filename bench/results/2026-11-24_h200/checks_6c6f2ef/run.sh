#!/bin/bash
# Device run at 6c6f2ef on one H200: scripts/gpu_checks.sh (the GPU suites x3, issue 17's GPU checks: accumulation,
# sync BN, timeline, torchvision weights; the multi-node training, fault and rank-equivalence tests with
# 2 ranks as 2 simulated nodes sharing the GPU,
# Fashion-MNIST on one GPU), then dtrain-bench-train bf16 b256 (benchmark-only path) twice, PyTorch
# eager in the same call, and dtrain-train on synthetic data (the path users run).
# Binaries carried xz'd in .carry/bin, Fashion-MNIST in .carry/fmnist.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/b
for f in .carry/bin/*.xz; do (xz -dc "$f" > /tmp/b/$(basename "$f" .xz) && chmod +x /tmp/b/$(basename "$f" .xz)) & done; wait
nvidia-smi -L | tee $OUT/gpu.txt
OUT=$OUT/gpu_checks BIN=/tmp/b timeout 480 scripts/gpu_checks.sh .carry/fmnist 2>&1 | tee $OUT/gpu_checks_summary.txt
rm -rf $OUT/gpu_checks/tensorboard $OUT/gpu_checks/timeline $OUT/gpu_checks/torchvision; tar czf $OUT/gpu_checks_logs.tgz -C $OUT gpu_checks && rm -rf $OUT/gpu_checks  # logs only: at most 8 files, 16 MiB each, come back
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
for i in 1 2; do
  echo "## dtrain-bench-train run $i" | tee -a $OUT/bench.txt
  $MPI -np 1 /tmp/b/dtrain-bench-train --precision bf16 --batch-per-rank 256 --timing-warmup-steps 15 --steps 40 --world-sizes 1 --metrics-file $OUT/bench_train_$i.json 2>&1 | grep -v " INFO " | tee -a $OUT/bench.txt
done
/opt/torch/.venv/bin/python bench/peers/pytorch_resnet50.py --batch-per-rank 256 --precision bf16 --mode eager --metrics-file $OUT/peer_eager.json 2>&1 | tail -3 | tee -a $OUT/bench.txt
$MPI -np 1 /tmp/b/dtrain-train --dataset synthetic --device gpu --batch-per-rank 256 --synthetic-samples 12800 --epochs 1 --max-total-steps 60 --log-every-steps 20 --max-validation-batches 2 --run-dir /tmp/train_run 2>&1 | grep -E "step|summary|epoch 0:" | tee -a $OUT/bench.txt
