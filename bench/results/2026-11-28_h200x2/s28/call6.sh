#!/bin/bash
# Session 28 call 6 (nvidia-h200-x2): why dtrain-train at 2 simulated nodes x 1 GPU (synthetic) runs
# below dtrain-bench-train on the same layout: loader threads (14 a rank, the default, against 2),
# and the loss read-back every 10 steps against every 50. 286f7a9, ResNet-50 bf16 b256, auto backend
# (the flat staged mpi-ring, bf16 wire), 2 epochs each; dtrain-bench-train 2x1 beside them.
set -u; SECONDS=0
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 DTRAIN_PLAN_CACHE=/tmp/plans DTRAIN_MPI_DEVICE_POINTERS=stage; mkdir -p $DTRAIN_PLAN_CACHE
B=/tmp/b; mkdir -p $B; tar xJf .device/s28/p4.tar.xz -C $B
S=$OUT/summary.txt; L=/tmp/logs; mkdir -p $L
{ nvidia-smi -L; echo "nproc $(nproc)"; } | tee $OUT/machine.txt > $S
MPI="mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_PLAN_CACHE -x DTRAIN_MPI_DEVICE_POINTERS -x DTRAIN_RANKS_PER_NODE=1"
timeout 120 $MPI -np 2 $B/dtrain-bench-train --precision bf16 --batch-per-rank 256 --timing-warmup-steps 10 --steps 30 \
  --world-sizes 2 --gradient-wire-dtype auto > $L/bench_2x1.log 2>&1
echo "bench-train 2x1 rc $? at $SECONDS s: $(grep -E '^ +2 ' $L/bench_2x1.log | head -1)" >> $S
train() {  # train NAME ARGS...
  local name=$1; shift
  echo "== $name: $*" >> $S
  timeout 100 $MPI -np 2 $B/dtrain-train --batch_per_rank 256 --max_validation_batches 2 --epochs 2 \
    --dataset synthetic --synthetic_samples 27648 --metrics_file $L/$name.jsonl "$@" > $L/$name.log 2>&1
  echo "exit $? at $SECONDS s" >> $S
  grep -E "epoch [0-9]+:|rror" $L/$name.log | sed 's/.*INFO  //' | sed -E "s/train loss .* images\), //" | cut -c1-200 >> $S
}
train threads14_log10 --log_every_steps 10
train threads2_log10 --log_every_steps 10 --loader_threads 2
train threads14_log50 --log_every_steps 50
train threads2_log50 --log_every_steps 50 --loader_threads 2
[ $SECONDS -lt 250 ] && train threads14_log10_again --log_every_steps 10
tar czf $OUT/logs.tgz -C /tmp logs
cat $S
