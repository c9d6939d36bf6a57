#!/bin/bash
# Device call 2 (1 H200): main 596ad21 (A) against the finalize kernels on centered sums, their loads
# in flight, and the stem pool's 32-bit index math (B): dtrain-bench-train ResNet-50 bf16 b256,
# graphs on, 3 interleaved rounds; then the whole scripts/gpu_checks.sh with B's binaries (the
# checks that need 2 or 4 GPUs leave themselves out on one).
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
SECONDS=0
B=/tmp/b; mkdir -p $B; tar xJf .device/s27/payload.tar.xz -C $B; xz -dc .device/s27/base-dtrain-bench-train.xz > $B/base-dtrain-bench-train
chmod +x $B/base-dtrain-bench-train
# The carried Fashion-MNIST train images are xz (the carry limit); the loader reads .gz.
F=/tmp/fmnist; mkdir -p $F; cp .device/fmnist/*.gz $F/; xz -dc .device/fmnist/train-images-idx3-ubyte.xz | gzip -1 > $F/train-images-idx3-ubyte.gz
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; echo "nproc $(nproc)"; echo "unpacked at $SECONDS s"; } | tee $OUT/machine.txt
OUT=$OUT/ab DTRAIN_PLAN_CACHE=/tmp/plans bench/run_gpu_train_ab.sh $B/base-dtrain-bench-train $B/bin/dtrain-bench-train 3
echo "ab done at $SECONDS s"
OUT=$OUT/gpu_checks BIN=$B/bin timeout 440 scripts/gpu_checks.sh $F > $OUT/gpu_checks_summary.txt 2>&1
echo "gpu_checks rc $? took $SECONDS s" >> $OUT/gpu_checks_summary.txt
grep -cE "^PASS" $OUT/gpu_checks_summary.txt; grep -E "^(FAIL|SKIP)|took" $OUT/gpu_checks_summary.txt
rm -rf $OUT/gpu_checks/tensorboard $OUT/gpu_checks/timeline $OUT/gpu_checks/torchvision $OUT/gpu_checks/plan_cache $OUT/gpu_checks/runs $OUT/ab/plan_cache
tar czf $OUT/logs.tgz -C $OUT ab gpu_checks && rm -rf $OUT/ab $OUT/gpu_checks
