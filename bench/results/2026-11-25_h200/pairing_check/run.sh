#!/bin/bash
# Device run after the trainer's wait pairing moved into DeviceWaitPairing (one H200): the train GPU
# suite, then dtrain-train from the generated JPEG tree with 14 and with 4 loader threads (progress
# every 10 steps: each interval's data wait against the images/s it lost).
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0 DTRAIN_REQUIRE_GPU=1
B=/tmp/b; mkdir -p $B
for f in .carry/bin/*.xz; do (xz -dc "$f" > $B/$(basename "$f" .xz) && chmod +x $B/$(basename "$f" .xz)) & done; wait
nvidia-smi -L | tee $OUT/machine.txt
S=$OUT/summary.txt
timeout 120 $B/dtrain-train-gpu-tests > $OUT/train_gpu_tests.log 2>&1
echo "train GPU tests exit $?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/train_gpu_tests.log | tr '\n' ' ')" | tee -a $S
$B/dtrain-make-image-tree /tmp/tree --realistic --classes 100 --train-per-class 138 --val-per-class 10 --seed 1 --threads 16 > /dev/null 2>&1
find /tmp/tree -type f -print0 | xargs -0 cat > /dev/null
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
for threads in 14 4; do
  echo "== dtrain-train JPEG tree, $threads loader threads" >> $S
  timeout 150 $MPI -np 1 $B/dtrain-train --batch_per_rank 256 --log_every_steps 10 --timing_warmup_steps 5 \
    --max_validation_batches 4 --dataset imagenet --data_dir /tmp/tree --loader_threads $threads --epochs 2 \
    > $OUT/jpeg_$threads.log 2>&1
  echo "exit $?" >> $S
  grep -E "step [0-9]+/|epoch [0-9]+:|rror" $OUT/jpeg_$threads.log | cut -c1-230 >> $S
done
cat $S
