#!/bin/bash
# Issue 12's bars on nvidia-h200-x2, every row and peer in this one call (device budget ~10 min):
# dtrain-bench-train on 1 GPU; dtrain-train ResNet-50 bf16 b256 on synthetic data (1 and 2 GPUs) and
# on the generated JPEG tree (13,800 training JPEGs, ~500x375) with 14 loader threads per rank
# (1 and 2 GPUs, 3 epochs); PyTorch training from the same tree (14 workers); dtrain-bench-data
# beside the torchvision DataLoader (bench/run_data.sh, 1 and 14 threads); dtrain-jpeg-gpu-tests.
# Binaries built on the CPU machine (static deps, sm_90) travel as .carry/bin/*.xz; the plan file of
# loader_ab_59f56c5 (H200, cuDNN 9.19) travels as .carry/plans, so no run pays the ~54 s plan search.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
export DTRAIN_PLAN_CACHE=/tmp/plans; mkdir -p $DTRAIN_PLAN_CACHE; cp .carry/plans/*.txt $DTRAIN_PLAN_CACHE/ 2>/dev/null
B=build/bin; mkdir -p $B
for f in .carry/bin/*.xz; do (xz -dc "$f" > $B/$(basename "$f" .xz) && chmod +x $B/$(basename "$f" .xz)) & done; wait
S=$OUT/summary.txt; L=/tmp/logs; mkdir -p $L
{ nvidia-smi -L; echo "nproc $(nproc)"; lscpu | grep -E "Model name"; echo "git $(git rev-parse --short HEAD 2>/dev/null)"; } | tee $OUT/machine.txt > $S
GPUS=$(nvidia-smi -L | wc -l)
SECONDS=0
$B/dtrain-make-image-tree /tmp/tree --realistic --classes 100 --train-per-class 138 --val-per-class 10 --seed 1 --threads $(nproc) > $L/tree.log 2>&1
echo "tree: exit $? at $SECONDS s, $(find /tmp/tree/train -type f | wc -l) training files, $(du -sm /tmp/tree | cut -f1) MiB" >> $S
find /tmp/tree -type f -print0 | xargs -0 cat > /dev/null
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_PLAN_CACHE"
echo "== dtrain-bench-train 1 GPU" >> $S
timeout 90 $MPI -np 1 $B/dtrain-bench-train --precision bf16 --batch-per-rank 256 --timing-warmup-steps 10 --steps 30 \
  --metrics-file $L/bench_train_1gpu.json > $L/bench_train_1gpu.log 2>&1
echo "exit $? at $SECONDS s" >> $S; grep -v " INFO " $L/bench_train_1gpu.log | tail -n 3 >> $S
RN50="--batch_per_rank 256 --log_every_steps 25 --timing_warmup_steps 5 --max_validation_batches 4"
train() {  # train NAME NP ARGS...
  local name=$1 np=$2; shift 2
  echo "== dtrain-train $name (np $np): $*" >> $S
  timeout 100 $MPI -np $np $B/dtrain-train $RN50 --metrics_file $L/$name.jsonl "$@" > $L/$name.log 2>&1
  echo "exit $? at $SECONDS s" >> $S
  grep -E "plans|loader threads|widened|step [0-9]+/|epoch [0-9]+:|rror" $L/$name.log | grep -v "vm:1/" | cut -c1-260 >> $S
}
train synthetic_1gpu 1 --dataset synthetic --synthetic_samples 20480 --epochs 1
train jpeg_1gpu 1 --dataset imagenet --data_dir /tmp/tree --loader_threads 14 --epochs 3
train synthetic_2gpu $GPUS --dataset synthetic --synthetic_samples 40960 --epochs 1
train jpeg_2gpu $GPUS --dataset imagenet --data_dir /tmp/tree --loader_threads 14 --epochs 3
echo "== PyTorch ResNet-50 training from /tmp/tree, 14 workers, 1 GPU" >> $S
timeout 90 /opt/torch/.venv/bin/python bench/peers/pytorch_imagefolder_train.py --data_dir /tmp/tree --workers 14 --batch-per-rank 256 \
  --metrics-file $L/pytorch_jpeg_1gpu.json > $L/pytorch_jpeg_1gpu.log 2>&1
echo "exit $? at $SECONDS s" >> $S; grep -v "Warning\|warn" $L/pytorch_jpeg_1gpu.log | tail -n 1 >> $S
echo "== loaders alone (bench/run_data.sh, threads 1,14)" >> $S
BATCHES=10 ROUNDS=3 OUT=$L/data timeout 100 bench/run_data.sh /tmp/tree 1,14 > $L/run_data.log 2>&1
echo "exit $? at $SECONDS s" >> $S; tail -n 8 $L/run_data.log >> $S
cp $L/data/*.json $L/bench_train_1gpu.json $L/pytorch_jpeg_1gpu.json $OUT/ 2>/dev/null
echo "== dtrain-jpeg-gpu-tests" >> $S
DTRAIN_REQUIRE_GPU=1 timeout 40 $B/dtrain-jpeg-gpu-tests > $L/jpeg_gpu_tests.log 2>&1
echo "exit $? at $SECONDS s" >> $S; grep -hE "deferred|PASSED|FAILED" $L/jpeg_gpu_tests.log >> $S
cat $S
tar czf $OUT/logs.tgz -C $L .
