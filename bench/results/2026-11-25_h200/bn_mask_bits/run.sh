#!/bin/bash
# On top of bn_waves' v2 (one-wave BN grids, 32-bit NCHW index math, no coefficient hoisting):
# v4 = v2 + the ReLU mask as 1 bit per element (written by the BN forward, read by its backward
# instead of y) + 32-bit index math in the generic pooling kernels. Same call: the GPU model and
# train tests on v4's code, dtrain-bench-train v2 and v4 (bf16 b256 twice each, fp32 b128),
# dtrain-train on synthetic data (v4), PyTorch compile and eager (bf16 b256), eager fp32 b128.
# Everything under $OUT is tarred at the end (at most 8 files come back).
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
R=/tmp/results; mkdir -p /tmp/b $R
for f in .carry/bin/*.xz; do (xz -dc "$f" > /tmp/b/$(basename "$f" .xz) && chmod +x /tmp/b/$(basename "$f" .xz)) & done; wait
nvidia-smi -L | tee $R/gpu.txt
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
VERDICT='^\[  (PASSED|FAILED) |^\[==========\]|FAILED'
for t in models train; do timeout 150 /tmp/b/dtrain-$t-gpu-tests > $R/${t}_gpu_tests.log 2>&1; echo "rc $?" >> $R/${t}_gpu_tests.log; grep -E "$VERDICT|^rc" $R/${t}_gpu_tests.log | tee -a $R/tests.txt; done
bench() {  # bench VARIANT PRECISION BATCH ROUND
  $MPI -np 1 /tmp/b/bench-$1 --precision $2 --batch-per-rank $3 --timing-warmup-steps 15 --steps 40 --world-sizes 1 --metrics-file $R/bench_$1_$2_$4.json 2>&1 | grep -v " INFO " | tail -1 | sed "s/^/$1 $2 b$3 round $4: /" | tee -a $R/bench.txt
}
for v in v2 v4; do bench $v bf16 256 1; done
P=/opt/torch/.venv/bin/python
$P bench/peers/pytorch_resnet50.py --batch-per-rank 256 --precision bf16 --mode compile --metrics-file $R/peer_compile.json 2>&1 | tail -1 | tee -a $R/bench.txt
for v in v4 v2; do bench $v bf16 256 2; done
for v in v2 v4; do bench $v fp32 128 1; done
$P bench/peers/pytorch_resnet50.py --batch-per-rank 128 --precision fp32 --mode eager --metrics-file $R/peer_fp32.json 2>&1 | tail -1 | tee -a $R/bench.txt
$MPI -np 1 /tmp/b/dtrain-train --dataset synthetic --device gpu --batch-per-rank 256 --synthetic-samples 12800 --epochs 1 --max-total-steps 60 --log-every-steps 20 --max-validation-batches 2 --run-dir /tmp/train_run 2>&1 | grep -E "epoch 0:|GiB peak" | tail -2 | tee -a $R/bench.txt
$P bench/peers/pytorch_resnet50.py --batch-per-rank 256 --precision bf16 --mode eager --metrics-file $R/peer_eager.json 2>&1 | tail -1 | tee -a $R/bench.txt
cp $R/bench.txt $R/tests.txt $OUT/; tar czf $OUT/results.tgz -C /tmp results
