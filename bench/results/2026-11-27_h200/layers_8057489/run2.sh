#!/bin/bash
# Device call 2: dtrain-bench-train ResNet-50 bf16 b256 on one GPU, the commit before the move (A)
# against the final commit (B), interleaved, 3 rounds each.
set -u
B=/tmp/b
[ -x $B/bin/dtrain-bench-train ] || tar xJf .device/bins.tar.xz -C $B
nvidia-smi -L | tee $OUT/machine.txt
OUT=$OUT/ab bench/run_gpu_train_ab.sh $B/bin/base-dtrain-bench-train $B/bin/dtrain-bench-train 3
rm -rf $OUT/ab/plan_cache
