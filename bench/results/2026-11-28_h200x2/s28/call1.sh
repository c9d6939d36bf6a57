#!/bin/bash
# Session 28 call 1 (nvidia-h200-x2): main 8498510 + the branches pool_split and stats_sums (combo
# 335fb71). The whole scripts/gpu_checks.sh on 2 GPUs (no repeats), cut in two as before.
set -u; SECONDS=0
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/d /tmp/fm/fmnist; tar xJf .device/s28/payload.tar.xz -C /tmp/d
cp .device/fmnist/*.gz /tmp/fm/fmnist/ && xz -dc .device/fmnist/train-images-idx3-ubyte.xz | gzip -1 > /tmp/fm/fmnist/train-images-idx3-ubyte.gz
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; echo "nproc $(nproc)"; } > $OUT/machine.txt 2>&1
S=$OUT/summary.txt; T=/tmp/t1; mkdir -p $T; echo "setup $SECONDS s" > $S
HEAD=$(grep -n '^# Three times over' scripts/gpu_checks.sh | cut -d: -f1)
CUT=$(grep -n '^# Synchronized batch norm on GPUs' scripts/gpu_checks.sh | cut -d: -f1)
sed -n "1,$((CUT - 1))p" scripts/gpu_checks.sh > /tmp/partA.sh; echo 'exit $status' >> /tmp/partA.sh
sed -i 's/ --gtest_repeat=3//' /tmp/partA.sh
sed -n "1,$((HEAD - 1))p;${CUT},\$p" scripts/gpu_checks.sh > /tmp/partB.sh
G=/tmp/g; mkdir -p $G
OUT=$G BIN=/tmp/d/bin DTRAIN_LIBRARY=/tmp/d/lib/libdtrain.so.1 timeout 280 bash /tmp/partA.sh /tmp/fm/fmnist > $T/partA.txt 2>&1
echo "checks A rc $? secs $SECONDS" >> $S
OUT=$G BIN=/tmp/d/bin DTRAIN_LIBRARY=/tmp/d/lib/libdtrain.so.1 timeout 200 bash /tmp/partB.sh /tmp/fm/fmnist > $T/partB.txt 2>&1
echo "checks B rc $? secs $SECONDS" >> $S
cd $G && grep -l "FAIL\|Failure" *.log > /tmp/faillist 2>/dev/null
cp /tmp/partA.sh /tmp/partB.sh $T/
tar czf $OUT/logs.tgz $(head -20 /tmp/faillist) library_device*.log multinode*.log -C /tmp t1 2>/dev/null
cat $S; grep -h "^FAIL\|^PASS\|^SKIP" $T/partA.txt $T/partB.txt | grep -v "^PASS" | head -20; grep -c "^PASS" $T/partA.txt $T/partB.txt
