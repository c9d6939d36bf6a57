#!/bin/bash
# Device run at 624b4be (the last code commit of session 12) on one H200: scripts/gpu_checks.sh,
# then dtrain-train from the generated JPEG tree with 14 and 4 loader threads (progress every 10
# steps: the data wait of each interval against the images/s it lost).
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
B=/tmp/b; mkdir -p $B
for f in .carry/bin/*.xz; do (xz -dc "$f" > $B/$(basename "$f" .xz) && chmod +x $B/$(basename "$f" .xz)) & done; wait
nvidia-smi -L | tee $OUT/machine.txt
SECONDS=0
OUT=$OUT/gpu_checks BIN=$B timeout 260 scripts/gpu_checks.sh .carry/fmnist > $OUT/gpu_checks_summary.txt 2>&1
echo "gpu_checks took $SECONDS s" >> $OUT/gpu_checks_summary.txt
grep -E "^(PASS|FAIL|SKIP) [a-z]" $OUT/gpu_checks_summary.txt
rm -rf $OUT/gpu_checks/tensorboard $OUT/gpu_checks/timeline $OUT/gpu_checks/torchvision; tar czf $OUT/gpu_checks_logs.tgz -C $OUT gpu_checks && rm -rf $OUT/gpu_checks
$B/dtrain-make-image-tree /tmp/tree --realistic --classes 100 --train-per-class 138 --val-per-class 10 --seed 1 --threads 16 > /dev/null 2>&1
find /tmp/tree -type f -print0 | xargs -0 cat > /dev/null
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
S=$OUT/summary.txt
for threads in 14 4; do
  echo "== dtrain-train JPEG tree, $threads loader threads" >> $S
  timeout 150 $MPI -np 1 $B/dtrain-train --batch_per_rank 256 --log_every_steps 10 --timing_warmup_steps 5 \
    --max_validation_batches 4 --dataset imagenet --data_dir /tmp/tree --loader_threads $threads --epochs 2 \
    > /tmp/jpeg_$threads.log 2>&1
  echo "exit $?" >> $S
  grep -E "step [0-9]+/|epoch [0-9]+:|rror" /tmp/jpeg_$threads.log | cut -c1-230 >> $S
done
cat $S
