#!/bin/bash
# jpeg_decoder at 890631c (chroma by replication) on one H200: dtrain-jpeg-gpu-tests three times,
# then dtrain-train ResNet-50 bf16 b256 on synthetic data and on the generated JPEG tree
# (2 epochs each), decoded by the loader threads (jpeg_decoder cpu) and by the hardware decoder
# (gpu), with 14 and with 4 loader threads, and PyTorch training from the same tree with 14 and
# with 4 DataLoader workers, all in this call.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
B=/tmp/b; mkdir -p $B
for f in .carry/proto/*.xz; do (xz -dc "$f" > $B/$(basename "$f" .xz) && chmod +x $B/$(basename "$f" .xz)) & done; wait
{ nvidia-smi -L; echo "nproc $(nproc)"; lscpu | grep -E "Model name"; } | tee $OUT/machine.txt
SECONDS=0
L=/tmp/logs; mkdir -p $L
DTRAIN_REQUIRE_GPU=1 timeout 120 $B/dtrain-jpeg-gpu-tests --gtest_repeat=3 > $L/jpeg_gpu_tests.log 2>&1
echo "dtrain-jpeg-gpu-tests x3: exit $?" | tee $OUT/summary.txt; grep -h "deferred" $L/jpeg_gpu_tests.log | tee -a $OUT/summary.txt
$B/dtrain-make-image-tree /tmp/tree --realistic --classes 100 --train-per-class 138 --val-per-class 10 --seed 1 --threads 16 > $L/tree.log 2>&1
find /tmp/tree -type f -print0 | xargs -0 cat > /dev/null
export DTRAIN_PLAN_CACHE=/tmp/plans
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_PLAN_CACHE"
S=$OUT/summary.txt
RN50="--batch_per_rank 256 --log_every_steps 25 --timing_warmup_steps 5 --max_validation_batches 4"
train() {  # train NAME ARGS...
  local name=$1; shift
  echo "== dtrain-train $name: $*" >> $S
  timeout 120 $MPI -np 1 $B/dtrain-train $RN50 --metrics_file $L/$name.jsonl "$@" > $L/$name.log 2>&1
  echo "exit $? at $SECONDS s" >> $S
  grep -E "loader threads|JPEGs so far|epoch [0-9]+:|rror" $L/$name.log | cut -c1-250 >> $S
}
train synthetic --dataset synthetic --synthetic_samples 12800 --epochs 1
for t in 14 4; do
  for d in cpu gpu; do
    train jpeg_${d}_${t}threads --dataset imagenet --data_dir /tmp/tree --loader_threads $t --epochs 2 --jpeg_decoder $d
  done
done
for w in 14 4; do
  echo "== PyTorch ResNet-50 training from /tmp/tree, $w workers" >> $S
  timeout 150 /opt/torch/.venv/bin/python bench/peers/pytorch_imagefolder_train.py --data_dir /tmp/tree --workers $w \
    --batch-per-rank 256 --steps 25 --metrics-file $L/pytorch_${w}workers.json 2>&1 | grep -v "Warning\|warn" | tail -2 >> $S
done
echo "done at $SECONDS s" >> $S
cat $S
tar czf $OUT/logs.tgz -C $L .
