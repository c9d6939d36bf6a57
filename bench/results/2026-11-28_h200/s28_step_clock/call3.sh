#!/bin/bash
# Session 28 call 3 (nvidia-h200, 16 vCPUs): dtrain-train ResNet-50 bf16 b256 on 1 GPU, synthetic
# and from a generated JPEG tree (27,600 training JPEGs ~500x375, 14 loader threads), 3 epochs,
# progress every 10 steps: main 0c2d66b's dtrain-train (the epoch's median step timed on the host)
# against the device step clock (the median step timed on the GPU), interleaved.
set -u; SECONDS=0
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 DTRAIN_PLAN_CACHE=/tmp/plans; mkdir -p $DTRAIN_PLAN_CACHE
B=/tmp/b; mkdir -p $B; tar xJf .device/s28/p3.tar.xz -C $B; tar xJf .device/s28/p3new.tar.xz -C $B
S=$OUT/summary.txt; L=/tmp/logs; mkdir -p $L
{ nvidia-smi -L; echo "nproc $(nproc)"; lscpu | grep -E "Model name"; } | tee $OUT/machine.txt > $S
$B/dtrain-make-image-tree /tmp/tree --realistic --classes 100 --train-per-class 276 --val-per-class 10 --seed 1 --threads $(nproc) > $L/tree.log 2>&1
echo "tree: exit $? at $SECONDS s, $(find /tmp/tree/train -type f | wc -l) training files, $(du -sm /tmp/tree | cut -f1) MiB" >> $S
find /tmp/tree -type f -print0 | xargs -0 cat > /dev/null
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_PLAN_CACHE"
RN50="--batch_per_rank 256 --log_every_steps 10 --max_validation_batches 4 --epochs 3"
train() {  # train NAME BINARY ARGS...
  local name=$1 bin=$2; shift 2
  echo "== $name: $bin $*" >> $S
  timeout 150 $MPI -np 1 $B/$bin $RN50 --metrics_file $L/$name.jsonl "$@" > $L/$name.log 2>&1
  echo "exit $? at $SECONDS s" >> $S
  grep -E "epoch [0-9]+:|rror" $L/$name.log | sed 's/.*INFO  //' | cut -c1-220 >> $S
}
SYN="--dataset synthetic --synthetic_samples 27648"
JPG="--dataset imagenet --data_dir /tmp/tree --loader_threads 14"
train warm_synthetic dtrain-train $SYN --epochs 1 --max-total-steps 20
for r in 1 2; do
  train synthetic_host_r$r dtrain-train $SYN
  train synthetic_device_r$r dtrain-train-new $SYN
  train jpeg_host_r$r dtrain-train $JPG
  train jpeg_device_r$r dtrain-train-new $JPG
  [ $SECONDS -gt 480 ] && break
done
tar czf $OUT/logs.tgz -C /tmp logs --exclude=tree.log
cat $S
