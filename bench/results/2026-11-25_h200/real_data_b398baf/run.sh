#!/bin/bash
# After the BN changes of b398baf (7,6xx img/s on the benchmark path): the path users run on one
# H200 (dtrain-train on synthetic data and on a generated JPEG tree, 14 loader threads, beside
# PyTorch training from the same tree), then ncu times of dtrain's own kernels, bf16 b256 and fp32
# b128 (for train_summary.md). Binaries carried xz'd in .carry/bin.
set -u
R=/tmp/real; mkdir -p $R
OLD=0 CLASSES_CHECK=0 GPU_TESTS=0 DATA_BENCH=0 TRAIN_TIMEOUT=120 OUT=$R/real_data timeout 400 bench/run_gpu_real_data.sh /tmp/tree > $R/real_data_run.log 2>&1
tar xzf $R/real_data/dtrain_real_data.tgz -O ./summary.log > $OUT/summary.log 2>/dev/null; cp $R/real_data/dtrain_real_data.tgz $OUT/
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
OURS='regex:^(add_bias|add_rows|add_scaled|apply|apply_vec|backward_apply|backward_apply_vec|backward_partials|backward_partials_vec|bias_gradient|eval_coefficients|finalize_backward|finalize_forward|fold|global_avg_pool_backward|global_avg_pool_forward|group_backward|group_statistics|max_pool_backward|max_pool_forward|max_pool_backward_vec|max_pool_forward_vec|mean|narrow|nchw_f32|nhwc_bf16|partial_moments|partial_moments_vec|relu_backward|relu_forward|row|row_metrics|scale|sgd|widen)_kernel$'
for p in "bf16 256" "fp32 128"; do set -- $p
  timeout 75 ncu --kernel-name-base function --kernel-name "$OURS" --cache-control none --clock-control none \
    --metrics gpu__time_duration.sum --csv build/bin/dtrain-bench-train --precision $1 --batch-per-rank $2 \
    --timing-warmup-steps 1 --steps 2 > $R/ncu_$1.csv 2> $R/ncu_$1.err; echo "ncu $1 rc $?" | tee -a $OUT/summary.log
  xz -c $R/ncu_$1.csv > $OUT/ncu_ours_$1.csv.xz
done
