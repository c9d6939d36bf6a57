#!/bin/bash
# scripts/gpu_checks.sh at e71474f (the last code commit of the GPU JPEG work) on one H200, then
# dtrain-train ResNet-50 bf16 b256 on the generated JPEG tree, 1 epoch each: --jpeg_decoder cpu with
# 14 loader threads and --jpeg_decoder gpu with 4, in this call.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
B=/tmp/b; mkdir -p $B
for f in .carry/bin/*.xz; do (xz -dc "$f" > $B/$(basename "$f" .xz) && chmod +x $B/$(basename "$f" .xz)) & done; wait
{ nvidia-smi -L; echo "nproc $(nproc)"; lscpu | grep -E "Model name"; } | tee $OUT/machine.txt
SECONDS=0
OUT=$OUT/gpu_checks BIN=$B timeout 300 scripts/gpu_checks.sh .carry/fmnist > $OUT/gpu_checks_summary.txt 2>&1
echo "gpu_checks took $SECONDS s" >> $OUT/gpu_checks_summary.txt
grep -cE "^PASS" $OUT/gpu_checks_summary.txt; grep -E "^(FAIL|SKIP)" $OUT/gpu_checks_summary.txt
grep -h "deferred" $OUT/gpu_checks/dtrain-jpeg-gpu-tests.log
rm -rf $OUT/gpu_checks/tensorboard $OUT/gpu_checks/timeline $OUT/gpu_checks/torchvision $OUT/gpu_checks/plan_cache; tar czf $OUT/gpu_checks_logs.tgz -C $OUT gpu_checks && rm -rf $OUT/gpu_checks
L=/tmp/logs; mkdir -p $L
$B/dtrain-make-image-tree /tmp/tree --realistic --classes 100 --train-per-class 138 --val-per-class 10 --seed 1 --threads 16 > $L/tree.log 2>&1
find /tmp/tree -type f -print0 | xargs -0 cat > /dev/null
export DTRAIN_PLAN_CACHE=/tmp/plans
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_PLAN_CACHE"
S=$OUT/summary.txt
RN50="--batch_per_rank 256 --log_every_steps 25 --timing_warmup_steps 5 --max_validation_batches 4"
for run in "cpu 14" "gpu 4"; do
  set -- $run
  echo "== dtrain-train --jpeg_decoder $1 --loader_threads $2" >> $S
  timeout 120 $MPI -np 1 $B/dtrain-train $RN50 --dataset imagenet --data_dir /tmp/tree --epochs 1 --jpeg_decoder $1 \
    --loader_threads $2 --metrics_file $L/jpeg_$1_$2.jsonl > $L/jpeg_$1_$2.log 2>&1
  echo "exit $? at $SECONDS s" >> $S
  grep -E "JPEGs so far|epoch [0-9]+:|rror" $L/jpeg_$1_$2.log | cut -c1-250 >> $S
done
cat $S
tar czf $OUT/logs.tgz -C $L .
