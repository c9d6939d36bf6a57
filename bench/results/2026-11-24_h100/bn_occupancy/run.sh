#!/bin/bash
# bn_mask plus the BN reductions with several rows in flight per thread, 8 blocks per SM for the
# reductions and launch bounds for the heaviest BN kernels: GPU layer and step tests, Fashion-MNIST on
# one GPU, dtrain-bench-train bf16 b256 (x2) and fp32 b128, dtrain-train synthetic, PyTorch compile and
# eager (bf16 b256, fp32 b128) in the same call; then ncu times of dtrain's own kernels.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/b
for f in .carry/bin/*.xz; do (xz -dc "$f" > /tmp/b/$(basename "$f" .xz) && chmod +x /tmp/b/$(basename "$f" .xz)) & done; wait
nvidia-smi -L | tee $OUT/gpu.txt
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
VERDICT='^\[  (PASSED|FAILED) |^\[==========\]|FAILED'
for t in models train; do timeout 300 /tmp/b/dtrain-$t-gpu-tests > /tmp/$t.log 2>&1; echo "rc $?" >> /tmp/$t.log; grep -E "$VERDICT|^rc" /tmp/$t.log | tee $OUT/${t}_gpu_tests.txt; done
for p in "bf16 256 1" "bf16 256 2" "fp32 128 1"; do set -- $p
  $MPI -np 1 /tmp/b/dtrain-bench-train --precision $1 --batch-per-rank $2 --timing-warmup-steps 15 --steps 40 --world-sizes 1 --metrics-file $OUT/bench_$1_$3.json 2>&1 | grep -v " INFO " | tail -1 | sed "s/^/$1 b$2: /" | tee -a $OUT/bench.txt
done
$MPI -np 1 /tmp/b/dtrain-train --dataset synthetic --device gpu --batch-per-rank 256 --synthetic-samples 12800 --epochs 1 --max-total-steps 60 --log-every-steps 20 --max-validation-batches 2 --run-dir /tmp/train_run 2>&1 | grep -E "epoch 0:" | tee -a $OUT/bench.txt
P=/opt/torch/.venv/bin/python
$P bench/peers/pytorch_resnet50.py --batch-per-rank 256 --precision bf16 --mode compile --metrics-file $OUT/peer_compile.json 2>&1 | tail -1 | tee -a $OUT/bench.txt
$P bench/peers/pytorch_resnet50.py --batch-per-rank 256 --precision bf16 --mode eager --metrics-file $OUT/peer_eager.json 2>&1 | tail -1 | tee -a $OUT/bench.txt
$P bench/peers/pytorch_resnet50.py --batch-per-rank 128 --precision fp32 --mode eager --metrics-file $OUT/peer_fp32.json 2>&1 | tail -1 | tee -a $OUT/bench.txt
$MPI -np 1 /tmp/b/dtrain-train --config configs/fashion_mnist_resnet.pbtxt --data_dir .carry/fmnist --device gpu --batch_per_rank 64 --log_every_steps 400 --run-dir /tmp/fm > /tmp/fm.log 2>&1
grep -h "epoch .*top-1\|summary: valid" /tmp/fm.log | tail -3 | tee $OUT/fashion_mnist_gpu.txt
OURS='regex:^(add_bias|add_rows|add_scaled|apply|apply_vec|backward_apply|backward_apply_vec|backward_partials|backward_partials_vec|bias_gradient|eval_coefficients|finalize_backward|finalize_forward|fold|global_avg_pool_backward|global_avg_pool_forward|group_backward|group_statistics|max_pool_backward|max_pool_forward|max_pool_backward_vec|max_pool_forward_vec|mean|narrow|nchw_f32|nhwc_bf16|partial_moments|partial_moments_vec|relu_backward|relu_forward|row|row_metrics|scale|sgd|widen)_kernel$'
timeout 240 ncu --kernel-name-base function --kernel-name "$OURS" --cache-control none --clock-control none \
  --metrics gpu__time_duration.sum --csv /tmp/b/dtrain-bench-train --precision bf16 --batch-per-rank 256 \
  --timing-warmup-steps 1 --steps 2 > /tmp/ncu.csv 2> /tmp/ncu.err; echo "ncu rc $?"; xz -c /tmp/ncu.csv > $OUT/ncu_ours.csv.xz
