#!/bin/bash
# ncu kernel times of dtrain's own kernels (everything but cuDNN's and cuBLAS's) over the first
# steps of dtrain-bench-train bf16 b256; the convolutions' times come from the plan measurements
# (DTRAIN_LOG_LEVEL=debug) in ../conv_plans/. Clocks and caches left alone.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/b
for f in .carry/bin/*.xz; do (xz -dc "$f" > /tmp/b/$(basename "$f" .xz) && chmod +x /tmp/b/$(basename "$f" .xz)) & done; wait
OURS='regex:^(add_bias|add_rows|add_scaled|apply|apply_vec|backward_apply|backward_apply_vec|backward_partials|backward_partials_vec|bias_gradient|eval_coefficients|finalize_backward|finalize_forward|fold|global_avg_pool_backward|global_avg_pool_forward|group_backward|group_statistics|max_pool_backward|max_pool_forward|mean|narrow|nchw_f32|nhwc_bf16|partial_moments|partial_moments_vec|relu_backward|relu_forward|row|row_metrics|scale|sgd|widen)_kernel$'
timeout 400 ncu --kernel-name-base function --kernel-name "$OURS" --cache-control none --clock-control none \
  --metrics gpu__time_duration.sum --csv /tmp/b/dtrain-bench-train --precision bf16 --batch-per-rank 256 \
  --timing-warmup-steps 1 --steps 2 > $OUT/ncu_ours.csv 2> $OUT/ncu.err
tail -3 $OUT/ncu.err; wc -l $OUT/ncu_ours.csv
