#!/bin/bash
# Session 20 call 1 (x4): the staging-order fix on the dtrain.torch 2x2 run that hung (fusion 4 MiB, twice), then the whole
# gpu_checks at HEAD in its two parts (A: lines 1-151, B: 1-45 + 152-233).
set -u; SECONDS=0
mkdir -p /tmp/d /tmp/fm; [ -d /tmp/fm/fmnist ] || tar xJf .device/fmnist.tar.xz -C /tmp/fm; tar xJf .device/payload.tar.xz -C /tmp/d
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; echo "nproc $(nproc)"; lscpu | grep -i "model name\|flags" | cut -c1-2000; } > $OUT/machine.txt 2>&1
S=$OUT/summary.txt; T=/tmp/t1; mkdir -p $T
PY=/opt/torch/.venv/bin/python
SP=/opt/torch/.venv/lib/python3.12/site-packages
(
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib NCCL_NVLS_ENABLE=0
export DTRAIN_LIBRARY=/tmp/d/lib/libdtrain.so.1 PYTHONPATH=$PWD/python PYTHONDONTWRITEBYTECODE=1
for f in 4194304 4194304; do
  timeout -k 5 50 mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_LIBRARY -x PYTHONPATH \
    -x DTRAIN_RANKS_PER_NODE=2 -x DTRAIN_FUSION_THRESHOLD=$f -x DTRAIN_STALL_WARNING_SECONDS=10 -x DTRAIN_STALL_ABORT_SECONDS=40 \
    -np 4 $PY bench/torch/train_resnet.py --mode dtrain --steps 20 --warmup 5 > $T/fusion_$f.$SECONDS.log 2>&1
  echo "torch 2x2 fusion $f rc $? $(grep -h 'images/s per GPU' $T/fusion_$f.*.log | tail -1) secs $SECONDS" >> $S
done
)
sed -n '1,151p' scripts/gpu_checks.sh > /tmp/partA.sh; echo 'exit $status' >> /tmp/partA.sh
sed -i 's/dtrain-jpeg-gpu-tests; do/dtrain-jpeg-gpu-tests dtrain-core-gpu-tests; do/; s/ --gtest_repeat=3//' /tmp/partA.sh
sed -n '1,45p;152,233p' scripts/gpu_checks.sh > /tmp/partB.sh
G=/tmp/g; mkdir -p $G
OUT=$G BIN=/tmp/d/bin DTRAIN_LIBRARY=/tmp/d/lib/libdtrain.so.1 timeout 300 bash /tmp/partA.sh /tmp/fm/fmnist > $T/partA.txt 2>&1
echo "checks A rc $? secs $SECONDS" >> $S
left=$((590 - SECONDS))
OUT=$G BIN=/tmp/d/bin DTRAIN_LIBRARY=/tmp/d/lib/libdtrain.so.1 timeout $left bash /tmp/partB.sh /tmp/fm/fmnist > $T/partB.txt 2>&1
echo "checks B rc $? secs $SECONDS" >> $S
cd $G && grep -l "FAIL\|Failure" *.log > /tmp/faillist 2>/dev/null
cp /tmp/partA.sh /tmp/partB.sh $T/
tar czf $OUT/logs.tgz $(head -20 /tmp/faillist) comm_staging*.log multinode_shape*.log library_device*.log fashion_mnist*.log python_*.log -C /tmp t1 2>/dev/null
cat $S; grep -h "^FAIL\|^PASS\|^SKIP" $T/partA.txt $T/partB.txt | grep -v "^PASS" | head -20; grep -c "^PASS" $T/partA.txt $T/partB.txt
