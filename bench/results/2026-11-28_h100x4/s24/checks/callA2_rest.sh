#!/bin/bash
# Session 24 call A2: the rest of the graphs gpu_checks (Fashion-MNIST both ways, then everything from sync BN on).
set -u; SECONDS=0
mkdir -p /tmp/d /tmp/fm; [ -d /tmp/fm/fmnist ] || tar xJf .device/fmnist.tar.xz -C /tmp/fm; [ -x /tmp/d/bin/dtrain-train ] || tar xJf .device/s24/graphs_payload.tar.xz -C /tmp/d
S=$OUT/summary.txt; T=/tmp/t2; mkdir -p $T
GC=.device/s24/gpu_checks_graphs.sh
CUT=$(grep -n '^# Synchronized batch norm on GPUs' $GC | cut -d: -f1); FM=$(grep -n 'e2e.fashion_mnist.gpu' $GC | cut -d: -f1)
sed -n "1,48p;$((FM - 1)),\$p" $GC > /tmp/partC.sh
bash -n /tmp/partC.sh || echo "partC syntax" >> $S
G=/tmp/g2; mkdir -p $G
OUT=$G BIN=/tmp/d/bin DTRAIN_LIBRARY=/tmp/d/lib/libdtrain.so.1 timeout 585 bash /tmp/partC.sh /tmp/fm/fmnist > $T/partC.txt 2>&1
echo "checks C rc $? secs $SECONDS" >> $S
cd $G && grep -l "FAIL\|Failure" *.log > /tmp/faillist 2>/dev/null
cp /tmp/partC.sh $T/
tar czf $OUT/logs.tgz $(head -20 /tmp/faillist) fashion_mnist*.log sync_batch*.log python_*.log -C /tmp t2 2>/dev/null
cat $S; grep -h "^FAIL\|^SKIP" $T/partC.txt | head -20; grep -c "^PASS" $T/partC.txt; tail -5 $T/partC.txt
