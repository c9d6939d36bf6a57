#!/bin/bash
# Session 22 call D (x4): dtrain-train from JPEG files (1 GPU, 2x2 hierarchical, 4 GPUs nccl), then synthetic, with the fix.
set -u; SECONDS=0
mkdir -p /tmp/d /tmp/n /tmp/bin; [ -x /tmp/d/bin/dtrain-bench-train ] || tar xJf .device/payload.tar.xz -C /tmp/d
[ -x /tmp/n/dtrain-train ] || tar xJf .device/s22/new.tar.xz -C /tmp/n
cp /tmp/n/dtrain-train /tmp/d/bin/dtrain-make-image-tree /tmp/bin/
X=/tmp/x; mkdir -p $X
sed -i '/^  dtrain_train e2e_synthetic/d' bench/run_gpu_xnode.sh
sed -i 's/^  dtrain_train e2e_jpeg_4gpu_nccl .*/&\n  dtrain_train e2e_synthetic_2x2 4 2 "${SYN[@]}" --synthetic_samples 81920 --backend hierarchical\n  dtrain_train e2e_synthetic_1gpu 1 - "${SYN[@]}" --synthetic_samples 20480/' bench/run_gpu_xnode.sh
OUT= BIN=/tmp/bin XNODE_DIR=$X timeout 235 bash bench/run_gpu_xnode.sh e2e > $X/run_e2e.txt 2>&1
echo "e2e rc $? secs $SECONDS" > $OUT/summary_parts.txt
python3 bench/summarize_xnode.py $X > $OUT/summary.txt 2>&1
tar czf $OUT/xnode.tgz --exclude=cache --exclude=runs -C /tmp x
cat $OUT/summary_parts.txt; sed -n '/dtrain-train/,$p' $OUT/summary.txt; cat $X/steps.txt
