#!/bin/bash
# Device call 1: batch norm before/after bitwise, then scripts/gpu_checks.sh on the final build.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:$SP/nvidia/cublas/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
B=/tmp/b; mkdir -p $B
SECONDS=0
tar xJf .device/bins.tar.xz -C $B &
(mkdir -p /tmp/bn && tar xJf .device/bn/bn.tar.xz -C /tmp/bn) &
wait
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; echo "nproc $(nproc)"; lscpu | grep -E "Model name"; echo "unpacked at $SECONDS s"; } | tee $OUT/machine.txt
# Batch norm: every pass, width, dtype and layout, the kernels of the commit before and after the
# width template, outputs compared byte for byte.
( cd /tmp/bn && ./bn_old /tmp/bn/old.bin > $OUT/bn_old.txt 2>&1; ./bn_new /tmp/bn/new.bin > $OUT/bn_new.txt 2>&1
  if cmp /tmp/bn/old.bin /tmp/bn/new.bin; then echo "BN BITWISE IDENTICAL: $(stat -c %s /tmp/bn/old.bin) bytes, $(wc -l < $OUT/bn_new.txt) cases"; else echo "BN OUTPUTS DIFFER"; diff $OUT/bn_old.txt $OUT/bn_new.txt | head -20; fi ) | tee $OUT/bn_bitwise.txt
echo "bn done at $SECONDS s"
OUT=$OUT/gpu_checks BIN=$B/bin timeout 480 scripts/gpu_checks.sh .device/fmnist > $OUT/gpu_checks_summary.txt 2>&1
echo "gpu_checks rc $? took $SECONDS s" >> $OUT/gpu_checks_summary.txt
grep -cE "^PASS" $OUT/gpu_checks_summary.txt; grep -E "^(FAIL|SKIP)|took" $OUT/gpu_checks_summary.txt
rm -rf $OUT/gpu_checks/tensorboard $OUT/gpu_checks/timeline $OUT/gpu_checks/torchvision $OUT/gpu_checks/plan_cache $OUT/gpu_checks/runs
tar czf $OUT/gpu_checks_logs.tgz -C $OUT gpu_checks && rm -rf $OUT/gpu_checks
