#!/bin/bash
# Device run for the one convolution geometry type (issue 15): the GPU checks at the new commit, then dtrain-bench-train
# before (dtrain-bench-train-base, main at babe879, before the ResNet plan) and after, interleaved, with PyTorch eager in
# the same call, then dtrain-train on synthetic data. Binaries carried xz'd in .carry/bin.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/b
for f in .carry/bin/*.xz; do (xz -dc "$f" > /tmp/b/$(basename "$f" .xz) && chmod +x /tmp/b/$(basename "$f" .xz)) & done; wait
nvidia-smi -L | tee $OUT/gpu.txt
OUT=$OUT/gpu_checks BIN=/tmp/b timeout 420 scripts/gpu_checks.sh .carry/fmnist 2>&1 | tee $OUT/gpu_checks_summary.txt
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
for i in 1 2; do
  for v in base new; do
    b=/tmp/b/dtrain-bench-train; [ $v = base ] && b=/tmp/b/dtrain-bench-train-base
    echo "## $v run $i" | tee -a $OUT/bench.txt
    $MPI -np 1 $b --precision bf16 --batch-per-rank 256 --timing-warmup-steps 15 --steps 40 --world-sizes 1 --metrics-file $OUT/bench_train_${v}_$i.json 2>&1 | grep -v " INFO " | tee -a $OUT/bench.txt
  done
done
/opt/torch/.venv/bin/python bench/peers/pytorch_resnet50.py --batch-per-rank 256 --precision bf16 --mode eager --metrics-file $OUT/peer_eager.json 2>&1 | tail -3 | tee -a $OUT/bench.txt
$MPI -np 1 /tmp/b/dtrain-train --dataset synthetic --device gpu --batch-per-rank 256 --synthetic-samples 12800 --epochs 1 --max-total-steps 60 --log-every-steps 20 --max-validation-batches 2 --run-dir $OUT/train_run 2>&1 | grep -E "step|summary|epoch 0:" | tee -a $OUT/bench.txt
