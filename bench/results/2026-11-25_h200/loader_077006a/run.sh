#!/bin/bash
# Device run at 077006a (the loader at 1.21x per thread) on one H200: scripts/gpu_checks.sh on main
# (f2a215f's host refactor and this change had run on no GPU), then bench/run_gpu_real_data.sh:
# dtrain-bench-train, dtrain-train on synthetic data and on the generated JPEG tree (14 loader
# threads, 3 epochs), PyTorch training from the same tree, and the loaders alone (dtrain-bench-data
# beside the torchvision DataLoader, 1-14 threads). Binaries carried xz'd in .carry/bin.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/b build/bin
for f in .carry/bin/*.xz; do (xz -dc "$f" > /tmp/b/$(basename "$f" .xz) && chmod +x /tmp/b/$(basename "$f" .xz)) & done; wait
cp /tmp/b/* build/bin/ && mv .carry/bin .carry/bin_unpacked  # run_gpu_real_data.sh would unpack them again
nvidia-smi -L | tee $OUT/gpu.txt
SECONDS=0
OUT=$OUT/gpu_checks BIN=/tmp/b timeout 230 scripts/gpu_checks.sh .carry/fmnist > $OUT/gpu_checks_summary.txt 2>&1
echo "gpu_checks took $SECONDS s" >> $OUT/gpu_checks_summary.txt
grep -E "^(PASS|FAIL|SKIP)" $OUT/gpu_checks_summary.txt | sort | uniq -c | head -40
rm -rf $OUT/gpu_checks/tensorboard $OUT/gpu_checks/timeline $OUT/gpu_checks/torchvision; tar czf $OUT/gpu_checks_logs.tgz -C $OUT gpu_checks && rm -rf $OUT/gpu_checks
R=/tmp/real
OLD=0 GPU_TESTS=0 ROUNDS=2 BATCHES=12 THREADS=1,2,4,8,14 TRAIN_TIMEOUT=110 OUT=$R timeout 345 bench/run_gpu_real_data.sh /tmp/tree > $OUT/real_data_run.log 2>&1
echo "real data rc $? after $SECONDS s" | tee -a $OUT/real_data_run.log
[ -e $R/dtrain_real_data.tgz ] || tar czf $R/dtrain_real_data.tgz -C $R --exclude dtrain_real_data.tgz .
cp $R/dtrain_real_data.tgz $OUT/ && tar xzf $R/dtrain_real_data.tgz -O ./summary.log > $OUT/summary.log 2>/dev/null
tail -60 $OUT/summary.log
