#!/bin/bash
# The path users run, measured on a GPU machine in one call: dtrain-train from a folder
# of JPEGs on 1 and all GPUs beside dtrain-train on synthetic data and dtrain-bench-train, PyTorch
# training from the same folder, and the loaders alone (dtrain-bench-data vs torchvision). Logs and
# JSON under $OUT; summary.log holds every table. Run from the repository root with build/bin
# present (carried; binaries compressed as .carry/bin/*.xz are unpacked first).
#   bench/run_gpu_real_data.sh [DATA_DIR]     (default /tmp/dtrain_jpeg_tree, generated when missing)
set -u
OUT=${OUT:-/tmp/dtrain_real_data}
DATA=${1:-/tmp/dtrain_jpeg_tree}
mkdir -p "$OUT" build/bin
TESTS=build/bin/tests  # the test binaries; carried flat, they are in build/bin
[ -d "$TESTS" ] || TESTS=build/bin
for f in .carry/bin/*.xz; do [ -e "$f" ] && xz -dc "$f" > "build/bin/$(basename "$f" .xz)" && chmod +x "build/bin/$(basename "$f" .xz)"; done
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
PY=/opt/torch/.venv/bin/python
GPUS=$(nvidia-smi -L | wc -l)
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
S=$OUT/summary.log
{ nvidia-smi -L; echo "nproc $(nproc)"; lscpu | grep "Model name"; } | tee "$S"
step() { echo "== $*" | tee -a "$S"; }

if [ ! -d "$DATA" ]; then
  step "generating $DATA"
  /usr/bin/time -f "%e s" bench/make_jpeg_tree.sh "$DATA" 2>&1 | tail -4 | tee -a "$S"
fi
find "$DATA" -type f -print0 | xargs -0 cat > /dev/null  # page cache, for every reader alike

train() {  # train NAME NP ARGS...: dtrain-train, its step and epoch lines into the summary
  local name=$1 np=$2
  shift 2
  step "dtrain-train $name (np $np): $*"
  timeout "${TRAIN_TIMEOUT:-150}" $MPI -np "$np" build/bin/dtrain-train --metrics_file "$OUT/$name.jsonl" "$@" \
    > "$OUT/$name.log" 2>&1
  echo "exit $?" | tee -a "$S"
  grep -E "loader threads|widened|step [0-9]+/|epoch [0-9]+:|rror" "$OUT/$name.log" | cut -c1-260 | tee -a "$S"
}
IMAGENET="--dataset imagenet --data_dir $DATA"
RN50="--batch_per_rank 256 --log_every_steps 25 --timing_warmup_steps 5 --max_validation_batches 4"

if [ "${CLASSES_CHECK:-0}" = 1 ] && [ -e .carry/old/dtrain-bench-train.xz ]; then
  # The 4.3 s step: ResNet-50 with 100 classes before and after the aligned parameter layout.
  xz -dc .carry/old/dtrain-bench-train.xz > /tmp/old-bench-train && chmod +x /tmp/old-bench-train
  for classes in 1000 100; do
    step "dtrain-bench-train --classes $classes, before the aligned layout (773dbe5)"
    timeout 100 $MPI -np 1 /tmp/old-bench-train --classes $classes --warmup 2 --steps 3 2>&1 | grep -E "^ +1 " | tee -a "$S"
    step "dtrain-bench-train --classes $classes, after (this build)"
    timeout 100 $MPI -np 1 build/bin/dtrain-bench-train --classes $classes --timing-warmup-steps 5 --steps 20 2>&1 | grep -E "^ +1 " | tee -a "$S"
  done
fi
if [ "${OLD:-1}" = 1 ] && [ -e .carry/old/dtrain-train.xz ]; then
  mkdir -p /tmp/old && xz -dc .carry/old/dtrain-train.xz > /tmp/old/dtrain-train && chmod +x /tmp/old/dtrain-train
  step "main at c96be46, mpirun's default binding (one core per rank), 14 loader threads"
  timeout 100 $MPI -np 1 /tmp/old/dtrain-train $IMAGENET --batch_per_rank 256 --loader_threads 14 --epochs 1 \
    --max_total_steps 4 --log_every_steps 2 --max_validation_batches 1 > "$OUT/old_bound.log" 2>&1
  grep -E "step [0-9]+/" "$OUT/old_bound.log" | tee -a "$S"
  step "main at c96be46, --bind-to none"
  timeout 100 $MPI --bind-to none -np 1 /tmp/old/dtrain-train $IMAGENET --batch_per_rank 256 --loader_threads 14 \
    --epochs 1 --max_total_steps 6 --log_every_steps 2 --max_validation_batches 1 > "$OUT/old_unbound.log" 2>&1
  grep -E "step [0-9]+/" "$OUT/old_unbound.log" | tee -a "$S"
fi

step "dtrain-bench-train 1 GPU"
[ "${BENCH:-1}" = 1 ] && timeout 120 $MPI -np 1 build/bin/dtrain-bench-train --precision bf16 --batch-per-rank 256 --timing-warmup-steps 10 --steps 30 \
  --metrics-file "$OUT/bench_train_1gpu.json" 2>&1 | grep -v " INFO " | tee -a "$S"
[ "${SYNTHETIC:-1}" = 1 ] && train synthetic_1gpu 1 $RN50 --dataset synthetic --synthetic_samples 20480 --epochs 1
# On all GPUs too: the from-files run on all GPUs is judged against this rate, not the 1-GPU one.
[ "${SYNTHETIC:-1}" = 1 ] && [ "$GPUS" -gt 1 ] && train synthetic_${GPUS}gpu "$GPUS" $RN50 --dataset synthetic \
  --synthetic_samples $((20480 * GPUS)) --epochs 1
# Three epochs: the first reads files the page cache may not hold yet and meets the plan search.
train jpeg_1gpu 1 $RN50 $IMAGENET --loader_threads 14 --epochs 3
[ "$GPUS" -gt 1 ] && train jpeg_${GPUS}gpu "$GPUS" $RN50 $IMAGENET --loader_threads 14 --epochs 3
step "PyTorch ResNet-50 training from $DATA, 14 workers"
[ "${PEER:-1}" = 1 ] && timeout 200 $PY bench/peers/pytorch_imagefolder_train.py --data_dir "$DATA" --workers 14 --batch-per-rank 256 \
  --metrics-file "$OUT/pytorch_jpeg_1gpu.json" 2>&1 | grep -v "Warning\|warn" | tail -2 | tee -a "$S"
if [ "${DATA_BENCH:-1}" = 1 ]; then
  step "loaders alone"
  BATCHES=${BATCHES:-12} OUT=$OUT timeout 300 bench/run_data.sh "$DATA" "${THREADS:-1,2,4,8,14}" > "$OUT/run_data.log" 2>&1
  tail -14 "$OUT/run_data.log" | tee -a "$S"
fi
if [ "${GPU_TESTS:-1}" = 1 ]; then
  step "GPU tests of this change"
  timeout 300 $TESTS/dtrain-models-gpu-tests --gtest_filter="${MODELS_FILTER:-*}" > "$OUT/models_gpu.log" 2>&1
  echo "models GPU tests exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/models_gpu.log" | tr '\n' ' ')" | tee -a "$S"
  timeout 120 $TESTS/dtrain-train-gpu-tests > "$OUT/train_gpu.log" 2>&1
  echo "train GPU tests exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/train_gpu.log" | tr '\n' ' ')" | tee -a "$S"
  if [ -x $TESTS/dtrain-train-mpi-tests ] && [ "$GPUS" -ge 2 ]; then
    timeout 200 $MPI -np "$GPUS" $TESTS/dtrain-train-mpi-tests --gtest_filter='RankEquivalence.OnGpus*' > "$OUT/rank_equivalence.log" 2>&1
    echo "GPU rank equivalence exit $? $(grep -h 'worst relative' "$OUT/rank_equivalence.log" | head -2 | tr '\n' ' ')" | tee -a "$S"
  fi
  FMNIST=${FMNIST:-.carry/fmnist}
  # e2e.fashion_mnist.gpu: the CPU run's config and global batch on one GPU, evaluated on the GPU.
  train fashion_mnist_gpu 1 --config configs/fashion_mnist_resnet.pbtxt --data_dir "$FMNIST" --device gpu \
    --batch_per_rank 64 --log_every_steps 0
fi
# Everything in one archive: the device tool brings back at most 8 files.
if [ "${PACK:-1}" = 1 ]; then
  tar czf /tmp/dtrain_real_data.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/dtrain_real_data.tgz "$OUT/"
fi
