#!/bin/bash
# ncu times of dtrain's own kernels (not cuDNN's), ResNet-50 bf16 b256 on one H200, binaries of
# 54301fe: 1 warm-up + 2 measured steps of dtrain-bench-train (the warm-up includes the plan search,
# whose cuDNN kernels the name filter leaves out). For train_summary.md's per-kind table.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/b; xz -dc .carry/bin/dtrain-bench-train.xz > /tmp/b/dtrain-bench-train && chmod +x /tmp/b/dtrain-bench-train
nvidia-smi -L | tee $OUT/gpu.txt
OURS='regex:^(add_bias|add_rows|add_scaled|apply|apply_vec|apply_quad|backward_apply|backward_apply_vec|backward_apply_quad|backward_partials|backward_partials_vec|backward_partials_quad|bias_gradient|eval_coefficients|finalize_backward|finalize_forward|fold|global_avg_pool_backward|global_avg_pool_forward|group_backward|group_statistics|max_pool_backward|max_pool_forward|max_pool_backward_vec|max_pool_forward_vec|mean|narrow|nchw_f32|nhwc_bf16|partial_moments|partial_moments_vec|partial_moments_quad|relu_backward|relu_forward|row|row_metrics|scale|sgd|widen)_kernel$'
timeout 300 ncu --kernel-name-base function --kernel-name "$OURS" --cache-control none --clock-control none \
  --metrics gpu__time_duration.sum --csv /tmp/b/dtrain-bench-train --precision bf16 --batch-per-rank 256 \
  --timing-warmup-steps 1 --steps 2 > /tmp/ncu.csv 2> /tmp/ncu.err; echo "ncu rc $?" | tee $OUT/ncu_rc.txt
tail -3 /tmp/ncu.err >> $OUT/ncu_rc.txt; xz -c /tmp/ncu.csv > $OUT/ncu_ours_bf16.csv.xz; wc -l /tmp/ncu.csv | tee -a $OUT/ncu_rc.txt
