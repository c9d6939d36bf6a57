#!/bin/bash
# Device run at 880f9e3 (the review mends) on one H200: scripts/gpu_checks.sh (its plans now in
# its own folder), then dtrain-bench-train, dtrain-train on synthetic data and on the JPEG tree with
# 14 and with 4 loader threads, progress every 10 steps (the data wait of each interval, settled
# after the loss read-back). PyTorch ran in final_bd0c9be/'s call.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
B=/tmp/b; mkdir -p $B
for f in .carry/bin/*.xz; do (xz -dc "$f" > $B/$(basename "$f" .xz) && chmod +x $B/$(basename "$f" .xz)) & done; wait
{ nvidia-smi -L; echo "nproc $(nproc)"; lscpu | grep -E "Model name"; } | tee $OUT/machine.txt
SECONDS=0
OUT=$OUT/gpu_checks BIN=$B timeout 260 scripts/gpu_checks.sh .carry/fmnist > $OUT/gpu_checks_summary.txt 2>&1
echo "gpu_checks took $SECONDS s" >> $OUT/gpu_checks_summary.txt
grep -E "^(PASS|FAIL|SKIP) [a-z]" $OUT/gpu_checks_summary.txt
rm -rf $OUT/gpu_checks/tensorboard $OUT/gpu_checks/timeline $OUT/gpu_checks/torchvision; tar czf $OUT/gpu_checks_logs.tgz -C $OUT gpu_checks && rm -rf $OUT/gpu_checks
L=/tmp/logs; mkdir -p $L
$B/dtrain-make-image-tree /tmp/tree --realistic --classes 100 --train-per-class 138 --val-per-class 10 --seed 1 --threads 16 > $L/tree.log 2>&1
find /tmp/tree -type f -print0 | xargs -0 cat > /dev/null
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
S=$OUT/summary.txt
timeout 90 $MPI -np 1 $B/dtrain-bench-train --precision bf16 --batch-per-rank 256 --timing-warmup-steps 10 --steps 30 \
  --metrics-file $L/bench_train.json 2>&1 | grep -v " INFO " | tail -1 | tee -a $S
RN50="--batch_per_rank 256 --log_every_steps 25 --timing_warmup_steps 5 --max_validation_batches 4"
train() {  # train NAME ARGS...
  local name=$1; shift
  echo "== dtrain-train $name: $*" >> $S
  timeout 150 $MPI -np 1 $B/dtrain-train $RN50 --metrics_file $L/$name.jsonl "$@" > $L/$name.log 2>&1
  echo "exit $? at $SECONDS s" >> $S
  grep -E "plans|loader threads|step [0-9]+/|epoch [0-9]+:|rror" $L/$name.log | cut -c1-250 >> $S
}
train synthetic --dataset synthetic --synthetic_samples 20480 --epochs 1
train jpeg_14threads --dataset imagenet --data_dir /tmp/tree --loader_threads 14 --epochs 3 --log_every_steps 10
train jpeg_4threads --dataset imagenet --data_dir /tmp/tree --loader_threads 4 --epochs 2 --log_every_steps 10
echo "done at $SECONDS s" >> $S
cat $S
tar czf $OUT/logs.tgz -C $L .
