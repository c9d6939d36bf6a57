#!/bin/bash
# Session 19 call 6 (x4, short): the staging-order fix (0f789e8): its GPU test on 2 ranks, then the dtrain.torch 2x2 run
# with DTRAIN_FUSION_THRESHOLD=4 MiB that hung twice at 6a48d77 (twice), and 1 MiB once; stall report 10 s, abort 40 s.
set -u; SECONDS=0
mkdir -p /tmp/p6; tar xJf .device/p6.tar.xz -C /tmp/p6
T=/tmp/t6; mkdir -p $T
PY=/opt/torch/.venv/bin/python
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=/tmp/p6/lib:$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib NCCL_NVLS_ENABLE=0 DTRAIN_REQUIRE_GPU=1
timeout 60 mpirun --allow-run-as-root -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_REQUIRE_GPU -x DTRAIN_MPI_DEVICE_POINTERS=stage /tmp/p6/dtrain-comm-staging-gpu-mpi-tests > $T/staging_test.log 2>&1
echo "staging test np2 rc $? secs $SECONDS" >> $T/summary.txt
export DTRAIN_LIBRARY=/tmp/p6/lib/libdtrain.so.1 PYTHONPATH=$PWD/python PYTHONDONTWRITEBYTECODE=1
for f in 4194304 4194304 1048576; do
  [ $((SECONDS + 50)) -lt 170 ] || break
  timeout -k 5 50 mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_LIBRARY -x PYTHONPATH \
    -x DTRAIN_RANKS_PER_NODE=2 -x DTRAIN_FUSION_THRESHOLD=$f -x DTRAIN_STALL_WARNING_SECONDS=10 -x DTRAIN_STALL_ABORT_SECONDS=40 \
    -np 4 $PY bench/torch/train_resnet.py --mode dtrain --steps 20 --warmup 5 > $T/fusion_$f.log 2>&1
  echo "fusion $f rc $? $(grep -h 'images/s per GPU' $T/fusion_$f.log | tail -1) secs $SECONDS" >> $T/summary.txt
done
tar czf $OUT/logs.tgz -C /tmp t6
cat $T/summary.txt; grep -h "OK \]\|FAILED\|PASSED\|stall" $T/*.log | cut -c1-300 | head -20
