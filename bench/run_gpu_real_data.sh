#!/bin/bash
# The path users run, measured on a GPU machine in one call (issue 12): dtrain-train from a folder
# of JPEGs on 1 and all GPUs beside dtrain-train on synthetic data and dtrain-bench-train, PyTorch
# training from the same folder, and the loaders alone (dtrain-bench-data vs torchvision). Logs and
# JSON under $OUT; summary.log holds every table. Run from the repository root with build/bin
# present (carried; binaries compressed as .carry/bin/*.xz are unpacked first).
#   bench/run_gpu_real_data.sh [DATA_DIR]     (default /tmp/dtrain_jpeg_tree, generated when missing)
set -u
OUT=${OUT:-/tmp/dtrain_real_data}
DATA=${1:-/tmp/dtrain_jpeg_tree}
mkdir -p "$OUT" build/bin
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
  timeout "${TRAIN_TIMEOUT:-150}" $MPI -np "$np" build/bin/dtrain-train --batch_per_rank 256 --log_every_steps 10 \
    --timing_warmup_steps 5 --max_validation_batches 4 --metrics_file "$OUT/$name.jsonl" "$@" > "$OUT/$name.log" 2>&1
  echo "exit $?" | tee -a "$S"
  grep -E "loader threads|widened|step [0-9]+/|epoch [0-9]+:|rror" "$OUT/$name.log" | cut -c1-260 | tee -a "$S"
}
IMAGENET="--dataset imagenet --data_dir $DATA"

if [ -x /tmp/old/dtrain-train ] || [ -e .carry/old/dtrain-train.xz ]; then
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
timeout 120 $MPI -np 1 build/bin/dtrain-bench-train --precision bf16 --batch 256 --warmup 10 --steps 30 \
  --json "$OUT/bench_train_1gpu.json" 2>&1 | grep -v " INFO " | tee -a "$S"
train synthetic_1gpu 1 --dataset synthetic --synthetic_samples 20480 --epochs 1
train jpeg_1gpu 1 $IMAGENET --loader_threads 14 --epochs 2
train jpeg_${GPUS}gpu "$GPUS" $IMAGENET --loader_threads 14 --epochs 3
step "PyTorch ResNet-50 training from $DATA, 14 workers"
timeout 200 $PY bench/peers/pytorch_imagefolder_train.py --data_dir "$DATA" --workers 14 --batch 256 \
  --json "$OUT/pytorch_jpeg_1gpu.json" 2>&1 | grep -v "Warning\|warn" | tail -2 | tee -a "$S"
if [ "${DATA_BENCH:-1}" = 1 ]; then
  step "loaders alone"
  BATCHES=${BATCHES:-12} OUT=$OUT timeout 300 bench/run_data.sh "$DATA" "${THREADS:-1,2,4,8,14}" > "$OUT/run_data.log" 2>&1
  tail -14 "$OUT/run_data.log" | tee -a "$S"
fi
