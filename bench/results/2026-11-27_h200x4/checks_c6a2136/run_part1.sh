#!/bin/bash
# Session 19 call 1 (x4): gpu_checks lines 1-148 (units once, graphs once, rank eq, accumulation, multinode,
# shape 2x2/4x1, comm, library, fmnist eager+graphs); then BN tests of the bn_ilp branches and the A/B.
set -u; SECONDS=0
mkdir -p /tmp/d /tmp/fm; [ -d /tmp/fm/fmnist ] || tar xJf .device/fmnist.tar.xz -C /tmp/fm; tar xJf .device/payload.tar.xz -C /tmp/d
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; echo "nproc $(nproc)"; env | grep -i "^OMPI_MCA" ; ompi_info --param btl vader --level 9 2>/dev/null | grep -i single_copy; } > $OUT/machine.txt 2>&1
sed -n '1,148p' scripts/gpu_checks.sh > /tmp/partA.sh; echo 'exit $status' >> /tmp/partA.sh
sed -i 's/dtrain-jpeg-gpu-tests; do/dtrain-jpeg-gpu-tests dtrain-core-gpu-tests; do/; s/ --gtest_repeat=3//' /tmp/partA.sh
G=/tmp/g; mkdir -p $G
OUT=$G BIN=/tmp/d/bin DTRAIN_LIBRARY=/tmp/d/lib/libdtrain.so.1 timeout 430 bash /tmp/partA.sh /tmp/fm/fmnist > $OUT/summary.txt 2>&1
echo "checks rc $? secs $SECONDS" >> $OUT/summary.txt
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib NCCL_NVLS_ENABLE=0 DTRAIN_REQUIRE_GPU=1
for u in u4 u2; do
  timeout 40 /tmp/d/bin/$u-dtrain-models-gpu-tests --gtest_filter='*BatchNorm*' > $G/bn_$u.log 2>&1
  echo "bn tests $u rc $? ($(grep -c '^\[       OK' $G/bn_$u.log) ok) secs $SECONDS" >> $OUT/summary.txt
done
export DTRAIN_PLAN_CACHE=/tmp/plans
left=$((585 - SECONDS))
if [ $left -gt 60 ]; then
  OUT=/tmp/ab4 timeout $(( (left - 10) / 2 )) bench/run_gpu_train_ab.sh /tmp/d/bin/dtrain-bench-train /tmp/d/bin/u4-dtrain-bench-train 2 > /dev/null 2>&1
  echo "ab u4 rc $? secs $SECONDS" >> $OUT/summary.txt; cat /tmp/ab4/summary.txt >> $OUT/summary.txt 2>/dev/null
  left=$((585 - SECONDS))
  OUT=/tmp/ab2 timeout $((left - 5)) bench/run_gpu_train_ab.sh /tmp/d/bin/dtrain-bench-train /tmp/d/bin/u2-dtrain-bench-train 2 > /dev/null 2>&1
  echo "ab u2 rc $? secs $SECONDS" >> $OUT/summary.txt; cat /tmp/ab2/summary.txt >> $OUT/summary.txt 2>/dev/null
fi
cd $G && grep -l "FAIL\|Failure\|rror" *.log > /tmp/faillist 2>/dev/null
tar czf $OUT/logs.tgz $(head -20 /tmp/faillist) multinode_shape*.log library_device*.log fashion_mnist*.log cross_node_wire.log bn_*.log -C /tmp ab4 ab2 --exclude=plan_cache 2>/dev/null
cat $OUT/summary.txt
