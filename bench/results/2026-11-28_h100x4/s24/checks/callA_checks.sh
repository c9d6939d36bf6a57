#!/bin/bash
# Session 24 call A (any kind; PAYLOAD=.device/s24/graphs_payload.tar.xz: branch graphs_default, CUDA graphs on by default): the whole gpu_checks in its two parts, cut at "# Synchronized batch norm on GPUs" (B: lines 1-45 and from there).
set -u; SECONDS=0
mkdir -p /tmp/d /tmp/fm; [ -d /tmp/fm/fmnist ] || tar xJf .device/fmnist.tar.xz -C /tmp/fm; tar xJf ${PAYLOAD:-.device/payload.tar.xz} -C /tmp/d
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; echo "nproc $(nproc)"; lscpu | grep -i "model name\|flags" | cut -c1-2000; } > $OUT/machine.txt 2>&1
S=$OUT/summary.txt; T=/tmp/t1; mkdir -p $T
PY=/opt/torch/.venv/bin/python
SP=/opt/torch/.venv/lib/python3.12/site-packages
CUT=$(grep -n '^# Synchronized batch norm on GPUs' ${GC:-scripts/gpu_checks.sh} | cut -d: -f1); sed -n "1,$((CUT - 1))p" ${GC:-scripts/gpu_checks.sh} > /tmp/partA.sh; echo 'exit $status' >> /tmp/partA.sh
sed -i 's/dtrain-jpeg-gpu-tests; do/dtrain-jpeg-gpu-tests dtrain-core-gpu-tests; do/; s/ --gtest_repeat=3//' /tmp/partA.sh
sed -n "1,45p;${CUT},\$p" ${GC:-scripts/gpu_checks.sh} > /tmp/partB.sh
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
