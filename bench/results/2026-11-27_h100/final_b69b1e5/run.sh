#!/bin/bash
# The final commit (the layer reorganisation, then libdtrain.so with position-independent code
# everywhere): scripts/gpu_checks.sh, then dtrain-bench-train against 597733e, interleaved.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
B=/tmp/b; mkdir -p $B
SECONDS=0
tar xJf .device/bins.tar.xz -C $B
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; echo "nproc $(nproc)"; lscpu | grep -E "Model name"; } | tee $OUT/machine.txt
OUT=$OUT/gpu_checks BIN=$B/bin timeout 400 scripts/gpu_checks.sh .device/fmnist > $OUT/gpu_checks_summary.txt 2>&1
echo "gpu_checks rc $? took $SECONDS s" >> $OUT/gpu_checks_summary.txt
grep -cE "^PASS" $OUT/gpu_checks_summary.txt; grep -E "^(FAIL|SKIP)|took" $OUT/gpu_checks_summary.txt
rm -rf $OUT/gpu_checks
OUT=/tmp/ab bench/run_gpu_train_ab.sh $B/bin/base-dtrain-bench-train $B/bin/dtrain-bench-train 3 > /dev/null 2>&1
cp /tmp/ab/summary.txt $OUT/ab_summary.txt; cp /tmp/ab/B_round1.log $OUT/bench_train_B_round1.log; cat $OUT/ab_summary.txt
