#!/bin/bash
# jpeg_decoder at c3b4a6c (after review) on one H200: dtrain-jpeg-gpu-tests three times, then
# dtrain-train ResNet-50 bf16 b256 on the generated JPEG tree, 2 epochs, with the hardware decoder
# (4 loader threads) and with the loader threads decoding (14), in this call; and the usage error
# for jpeg_decoder gpu with another dataset.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
B=/tmp/b; mkdir -p $B
for f in .carry/proto/*.xz; do (xz -dc "$f" > $B/$(basename "$f" .xz) && chmod +x $B/$(basename "$f" .xz)) & done; wait
{ nvidia-smi -L; echo "nproc $(nproc)"; lscpu | grep -E "Model name"; } | tee $OUT/machine.txt
S=$OUT/summary.txt; L=/tmp/logs; mkdir -p $L
DTRAIN_REQUIRE_GPU=1 timeout 120 $B/dtrain-jpeg-gpu-tests --gtest_repeat=3 > $L/jpeg_gpu_tests.log 2>&1
echo "dtrain-jpeg-gpu-tests x3: exit $?" >> $S; grep -h "deferred" $L/jpeg_gpu_tests.log >> $S
$B/dtrain-make-image-tree /tmp/tree --realistic --classes 100 --train-per-class 138 --val-per-class 10 --seed 1 --threads 16 > $L/tree.log 2>&1
find /tmp/tree -type f -print0 | xargs -0 cat > /dev/null
export DTRAIN_PLAN_CACHE=/tmp/plans
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_PLAN_CACHE"
RN50="--batch_per_rank 256 --log_every_steps 25 --timing_warmup_steps 5 --max_validation_batches 4"
train() {  # train NAME ARGS...
  local name=$1; shift
  echo "== dtrain-train $name: $*" >> $S
  timeout 150 $MPI -np 1 $B/dtrain-train $RN50 --metrics_file $L/$name.jsonl "$@" > $L/$name.log 2>&1
  echo "exit $? at $SECONDS s" >> $S
  grep -E "loader threads|JPEGs so far|epoch [0-9]+:|rror" $L/$name.log | cut -c1-250 >> $S
}
train jpeg_cpu_14threads --dataset imagenet --data_dir /tmp/tree --loader_threads 14 --epochs 2 --jpeg_decoder cpu
train jpeg_gpu_4threads --dataset imagenet --data_dir /tmp/tree --loader_threads 4 --epochs 2 --jpeg_decoder gpu
train synthetic_gpu_decoder --dataset synthetic --synthetic_samples 2560 --epochs 1 --jpeg_decoder gpu
echo "done at $SECONDS s" >> $S
cat $S
tar czf $OUT/logs.tgz -C $L .
