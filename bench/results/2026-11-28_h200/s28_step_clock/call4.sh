#!/bin/bash
# Session 28 call 4 (nvidia-h200, 16 vCPUs), the device step clock committed on main:
# dtrain-train-gpu-tests (the clock's own test among them); dtrain-train ResNet-50 bf16 b256 from the
# generated JPEG tree (27,600 JPEGs) with 14 and 15 loader threads, synthetic beside them;
# dtrain-bench-train fp32 NCHW b128 against PyTorch eager fp32 b128 in the same call.
set -u; SECONDS=0
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 DTRAIN_PLAN_CACHE=/tmp/plans DTRAIN_REQUIRE_GPU=1; mkdir -p $DTRAIN_PLAN_CACHE
B=/tmp/b; mkdir -p $B; tar xJf .device/s28/p4.tar.xz -C $B
S=$OUT/summary.txt; L=/tmp/logs; mkdir -p $L
{ nvidia-smi -L; echo "nproc $(nproc)"; lscpu | grep -E "Model name"; } | tee $OUT/machine.txt > $S
$B/dtrain-make-image-tree /tmp/tree --realistic --classes 100 --train-per-class 276 --val-per-class 10 --seed 1 --threads $(nproc) > $L/tree.log 2>&1 &
TREE=$!
timeout 200 $B/dtrain-train-gpu-tests > $L/train_gpu_tests.log 2>&1
echo "dtrain-train-gpu-tests rc $? at $SECONDS s: $(grep -E '^\[  (PASSED|FAILED)' $L/train_gpu_tests.log | tr '\n' ' ')" >> $S
grep -A3 "DeviceStepClock" $L/train_gpu_tests.log | grep -E "OK|FAILED" | head -3 >> $S
wait $TREE; echo "tree: at $SECONDS s, $(find /tmp/tree/train -type f | wc -l) training files" >> $S
find /tmp/tree -type f -print0 | xargs -0 cat > /dev/null
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_PLAN_CACHE"
RN50="--batch_per_rank 256 --log_every_steps 10 --max_validation_batches 4 --epochs 3"
train() {  # train NAME ARGS...
  local name=$1; shift
  echo "== $name: $*" >> $S
  timeout 150 $MPI -np 1 $B/dtrain-train $RN50 --metrics_file $L/$name.jsonl "$@" > $L/$name.log 2>&1
  echo "exit $? at $SECONDS s" >> $S
  grep -E "epoch [0-9]+:|rror" $L/$name.log | sed 's/.*INFO  //' | sed -E "s/train loss .* images\), //" | cut -c1-200 >> $S
}
SYN="--dataset synthetic --synthetic_samples 27648"
JPG="--dataset imagenet --data_dir /tmp/tree"
for r in 1 2; do
  train synthetic_r$r $SYN
  train jpeg14_r$r $JPG --loader_threads 14
  train jpeg15_r$r $JPG --loader_threads 15
  [ $SECONDS -gt 330 ] && break
done
timeout 100 $MPI -np 1 $B/dtrain-bench-train --precision fp32 --batch-per-rank 128 --timing-warmup-steps 10 --steps 30 \
  --metrics-file $L/bench_fp32_b128.json > $L/bench_fp32.log 2>&1
echo "bench fp32 b128 rc $? at $SECONDS s: $(grep -v INFO $L/bench_fp32.log | grep -E '^ +1 ' | head -1)" >> $S
timeout 150 /opt/torch/.venv/bin/python bench/peers/pytorch_resnet50.py --batch-per-rank 128 --precision fp32 --mode eager \
  --metrics-file $L/peer_fp32_eager.json > $L/peer_fp32.log 2>&1
echo "peer fp32 eager rc $? at $SECONDS s: $(tail -1 $L/peer_fp32.log)" >> $S
rm -f $L/tree.log; tar czf $OUT/logs.tgz -C /tmp logs
cat $S
