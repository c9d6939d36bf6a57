#!/bin/bash
# Session 19 call 5 (x4, short): the dtrain.torch 2x2 run with DTRAIN_FUSION_THRESHOLD=4 MiB that timed out, with stall
# reports after 10 s and an abort after 40 s; then CPU all-reduce vs gloo on this machine's CPUs.
set -u; SECONDS=0
mkdir -p /tmp/d; [ -f /tmp/d/lib/libdtrain.so.1 ] || tar xJf .device/payload.tar.xz -C /tmp/d
T=/tmp/t5; mkdir -p $T
PY=/opt/torch/.venv/bin/python
export DTRAIN_LIBRARY=/tmp/d/lib/libdtrain.so.1 PYTHONPATH=$PWD/python PYTHONDONTWRITEBYTECODE=1 PYTHONFAULTHANDLER=1
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib NCCL_NVLS_ENABLE=0
timeout -k 5 70 mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_LIBRARY -x PYTHONPATH -x PYTHONFAULTHANDLER \
  -x DTRAIN_RANKS_PER_NODE=2 -x DTRAIN_FUSION_THRESHOLD=4194304 -x DTRAIN_STALL_WARNING_SECONDS=10 -x DTRAIN_STALL_ABORT_SECONDS=40 \
  -np 4 $PY bench/torch/train_resnet.py --mode dtrain --steps 20 --warmup 5 > $T/fusion4m.log 2>&1
echo "fusion4m rc $? secs $SECONDS" >> $T/summary.txt
for np in 2 4; do for b in dtrain gloo; do
  CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1 timeout 50 mpirun --allow-run-as-root --oversubscribe -x PYTHONFAULTHANDLER -x DTRAIN_LIBRARY -x PYTHONPATH -np $np $PY bench/torch/cpu_allreduce.py \
    --backend $b --json $T/${b}_np${np}.json > $T/${b}_np${np}.log 2>&1
  echo "cpu $b np$np rc $? secs $SECONDS" >> $T/summary.txt
done; done
tar czf $OUT/logs.tgz -C /tmp t5 2>/dev/null
cat $T/summary.txt; grep -h "dtrain \|gloo " $T/*_np*.log | grep -v INFO; grep -h "stall\|STALL\|waiting\|Fatal" $T/fusion4m.log | cut -c1-400 | head -20
