#!/bin/bash
# dtrain-train itself (the path users run), ResNet-50 bf16 b256 on synthetic ImageNet-shaped data,
# 597733e (A) against the final commit (B), interleaved A B B A, one GPU; the epoch line's median rate.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 DTRAIN_PLAN_CACHE=/tmp/plans
B=/tmp/tt; mkdir -p $B; tar xJf .device/tt/tt.tar.xz -C $B
nvidia-smi -L | tee $OUT/machine.txt
ARGS="--dataset synthetic --synthetic_samples 25600 --batch_per_rank 256 --epochs 1 --log_every_steps 25 --timing_warmup_steps 10 --max_validation_batches 2 --loader_threads 14"
for r in "A base-dtrain-train 1" "B dtrain-train 1" "B dtrain-train 2" "A base-dtrain-train 2"; do
  set -- $r
  timeout 200 mpirun --allow-run-as-root -np 1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_PLAN_CACHE $B/$2 $ARGS > $OUT/$1_$3.log 2>&1
  echo "$1 round $3 rc $?: $(grep -oE 'epoch 0: .*' $OUT/$1_$3.log | grep -oE '[0-9]+ images/s \([0-9]+ per rank\) at the median step, data wait [0-9.e-]+%')" | tee -a $OUT/summary.txt
done
