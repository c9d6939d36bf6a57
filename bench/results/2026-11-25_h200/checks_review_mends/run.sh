#!/bin/bash
# After the review mends on top of 2d9b0ab (a generic-path BN test case of 1 M elements, guard
# words after the ReLU mask, backward refused after an eval forward, the SGD and input-normalize
# grids through one_wave_grid): the GPU model and train tests, dtrain-bench-train bf16 b256 and
# fp32 b128, dtrain-train on synthetic data. Everything is tarred at the end.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
R=/tmp/results; mkdir -p /tmp/b $R
for f in .carry/bin/*.xz; do (xz -dc "$f" > /tmp/b/$(basename "$f" .xz) && chmod +x /tmp/b/$(basename "$f" .xz)) & done; wait
nvidia-smi -L | tee $R/gpu.txt
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
for t in models train; do timeout 150 /tmp/b/dtrain-$t-gpu-tests > $R/${t}_gpu_tests.log 2>&1; echo "rc $?" >> $R/${t}_gpu_tests.log; grep -E '^\[  (PASSED|FAILED) |^\[==========\]|FAILED|^rc' $R/${t}_gpu_tests.log | tee -a $R/tests.txt; done
for p in "bf16 256" "fp32 128"; do set -- $p
  $MPI -np 1 /tmp/b/dtrain-bench-train --precision $1 --batch-per-rank $2 --timing-warmup-steps 15 --steps 40 --world-sizes 1 --metrics-file $R/bench_$1.json 2>&1 | grep -v " INFO " | tail -1 | sed "s/^/$1 b$2: /" | tee -a $R/bench.txt
done
$MPI -np 1 /tmp/b/dtrain-train --dataset synthetic --device gpu --batch-per-rank 256 --synthetic-samples 12800 --epochs 1 --max-total-steps 60 --log-every-steps 20 --max-validation-batches 2 --run-dir /tmp/train_run 2>&1 | grep -E "epoch 0:" | tee -a $R/bench.txt
cp $R/bench.txt $R/tests.txt $OUT/; tar czf $OUT/results.tgz -C /tmp results
