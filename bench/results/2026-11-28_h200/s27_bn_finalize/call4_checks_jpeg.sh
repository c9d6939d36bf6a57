#!/bin/bash
# Device call 4 (1 H200), main at 8ca9026: the accumulation check with the fp32 wire pinned (1 and 2
# ranks); dtrain-bench-train; dtrain-train ResNet-50 bf16 b256 on synthetic data and from the
# generated JPEG tree (13,800 training JPEGs ~500x375, 14 loader threads, 3 epochs); ncu of the
# finalize kernels (forward now on centered sums).
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
export DTRAIN_PLAN_CACHE=/tmp/plans; mkdir -p $DTRAIN_PLAN_CACHE
SECONDS=0
B=/tmp/b; mkdir -p $B; tar xJf .device/s27/p4.tar.xz -C $B
S=$OUT/summary.txt; L=/tmp/logs; mkdir -p $L
{ nvidia-smi -L; echo "nproc $(nproc)"; lscpu | grep -E "Model name"; } | tee $OUT/machine.txt > $S
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_PLAN_CACHE"
for np in 1 2; do
  timeout 120 $MPI -np $np $B/dtrain-train-mpi-tests '--gtest_filter=GradientAccumulation.OnGpus*' > $L/accumulation_np$np.log 2>&1
  echo "accumulation_gpu_np$np rc $?: $(grep -h 'worst relative' $L/accumulation_np$np.log | head -1)" >> $S
done
$B/dtrain-make-image-tree /tmp/tree --realistic --classes 100 --train-per-class 138 --val-per-class 10 --seed 1 --threads $(nproc) > $L/tree.log 2>&1
echo "tree: exit $? at $SECONDS s, $(find /tmp/tree/train -type f | wc -l) training files, $(du -sm /tmp/tree | cut -f1) MiB" >> $S
find /tmp/tree -type f -print0 | xargs -0 cat > /dev/null
echo "== dtrain-bench-train 1 GPU" >> $S
timeout 90 $MPI -np 1 $B/dtrain-bench-train --precision bf16 --batch-per-rank 256 --timing-warmup-steps 15 --steps 40 \
  --metrics-file $OUT/bench_train_1gpu.json > $L/bench_train_1gpu.log 2>&1
echo "exit $? at $SECONDS s" >> $S; grep -v " INFO " $L/bench_train_1gpu.log | tail -n 3 >> $S
RN50="--batch_per_rank 256 --log_every_steps 25 --timing_warmup_steps 5 --max_validation_batches 4"
train() {  # train NAME NP ARGS...
  local name=$1 np=$2; shift 2
  echo "== dtrain-train $name (np $np): $*" >> $S
  timeout 120 $MPI -np $np $B/dtrain-train $RN50 --metrics_file $L/$name.jsonl "$@" > $L/$name.log 2>&1
  echo "exit $? at $SECONDS s" >> $S
  grep -E "loader threads|step [0-9]+/|epoch [0-9]+:|rror" $L/$name.log | cut -c1-260 >> $S
}
train synthetic_1gpu 1 --dataset synthetic --synthetic_samples 20480 --epochs 1
train jpeg_1gpu 1 --dataset imagenet --data_dir /tmp/tree --loader_threads 14 --epochs 3
OURS='regex:^(finalize_backward|finalize_forward)_kernel$'
timeout 120 ncu --kernel-name-base function --kernel-name "$OURS" --cache-control none --clock-control none \
  --metrics gpu__time_duration.sum --csv $B/dtrain-bench-train --precision bf16 --batch-per-rank 256 \
  --timing-warmup-steps 1 --steps 2 > $OUT/ncu_finalize.csv 2> $L/ncu.err; echo "ncu rc $? at $SECONDS s" >> $S
cat $S
tar czf $OUT/logs.tgz -C /tmp logs
