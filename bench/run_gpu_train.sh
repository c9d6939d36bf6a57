#!/bin/bash
# ResNet-50 training throughput on the GPU machine: dtrain-bench-train and the PyTorch peer in the
# same call, logs and JSON under $OUT. Run from the repository root with build/bin carried.
#   bench/run_gpu_train.sh single   # one GPU: bf16 b256 and fp32 b128, each beside PyTorch eager (+ compile)
#   bench/run_gpu_train.sh scaling  # all GPUs: dtrain 1 and N GPUs, PyTorch DDP 1 and N GPUs (eager and compile)
#   bench/run_gpu_train.sh profile  # nsys (or ncu) kernel time summary of a few bf16 b256 steps
#   bench/run_gpu_train.sh memory   # peak device memory, bf16 b256: dtrain (and its plan) beside torch.compile and eager
#   bench/run_gpu_train.sh graphs   # one GPU, bf16 b256/b64/b32: DTRAIN_CUDA_GRAPHS=0 (eager) against 1
#                                   # (and N GPUs over NCCL when there are several)
set -u
OUT=${OUT:-/tmp/dtrain_bench}
mkdir -p "$OUT"
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
export DTRAIN_CUDA_GRAPHS=${DTRAIN_CUDA_GRAPHS:-1}  # the default step (graphs) unless asked (the graphs mode sets both)
PY=/opt/torch/.venv/bin/python
TORCHRUN=/opt/torch/.venv/bin/torchrun
GPUS=$(nvidia-smi -L | wc -l)
nvidia-smi -L > "$OUT/gpus.txt"
ours() {  # ours NAME NP ARGS...
  local name=$1 np=$2
  shift 2
  echo "== dtrain $name: dtrain-bench-train $*" | tee -a "$OUT/summary.log"
  timeout 300 mpirun --allow-run-as-root -np "$np" -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_CUDA_GRAPHS \
    build/bin/dtrain-bench-train --metrics-file "$OUT/dtrain_$name.json" "$@" 2>&1 | grep -v " INFO " | tee "$OUT/dtrain_$name.log" | tee -a "$OUT/summary.log"
}
peer() {  # peer NAME NPROC ARGS...
  local name=$1 np=$2
  shift 2
  echo "== pytorch $name ($np GPU): $*" | tee -a "$OUT/summary.log"
  if [ "$np" = 1 ]; then
    timeout 300 $PY bench/peers/pytorch_resnet50.py --metrics-file "$OUT/pytorch_$name.json" "$@" 2>&1 | tail -3 | tee -a "$OUT/summary.log"
  else
    timeout 300 $TORCHRUN --nproc_per_node "$np" bench/peers/pytorch_resnet50.py --metrics-file "$OUT/pytorch_$name.json" "$@" 2>&1 | tail -3 | tee -a "$OUT/summary.log"
  fi
}
case "${1:-single}" in
  single)
    ours bf16_b256 1 --precision bf16 --batch-per-rank 256 --timing-warmup-steps 15 --steps 40
    peer eager_bf16_b256 1 --precision bf16 --batch-per-rank 256 --mode eager
    ours fp32_b128 1 --precision fp32 --batch-per-rank 128 --timing-warmup-steps 10 --steps 30
    peer eager_fp32_b128 1 --precision fp32 --batch-per-rank 128 --mode eager
    ;;
  profile)
    if command -v nsys > /dev/null; then
      nsys profile -o "$OUT/bf16_b256" --force-overwrite true -t cuda,nvtx build/bin/dtrain-bench-train \
        --precision bf16 --batch-per-rank 256 --timing-warmup-steps 5 --steps 10 > "$OUT/profile_run.log" 2>&1
      nsys stats --report cuda_gpu_kern_sum --format csv -o "$OUT/kernels" "$OUT/bf16_b256.nsys-rep" > /dev/null 2>&1
      rm -f "$OUT"/*.nsys-rep "$OUT"/*.sqlite
    else
      # ncu replays kernels, so cuDNN's measurements under it would pick other algorithms: let the
      # first two steps (the measuring one included) run unprofiled, then profile one whole step
      # with the clocks and caches left alone.
      echo "no nsys; ncu on step 3" | tee -a "$OUT/summary.log"
      ncu --launch-skip "${SKIP:-1466}" --launch-count "${COUNT:-542}" --cache-control none --clock-control none \
        --metrics gpu__time_duration.sum --csv build/bin/dtrain-bench-train --precision bf16 --batch-per-rank 256 \
        --timing-warmup-steps 2 --steps 2 > "$OUT/ncu_kernels.csv" 2> "$OUT/ncu.err"
    fi
    ;;
  memory)
    build/bin/dtrain-bench-train --memory-plan --precision bf16 --batch-per-rank 256 | tee -a "$OUT/summary.log"
    ours memory_bf16_b256 1 --precision bf16 --batch-per-rank 256 --timing-warmup-steps 10 --steps 20 --world-sizes 1
    peer memory_compile_bf16_b256 1 --precision bf16 --batch-per-rank 256 --mode compile
    peer memory_eager_bf16_b256 1 --precision bf16 --batch-per-rank 256 --mode eager
    $PY - "$OUT" << 'PYEOF' | tee -a "$OUT/summary.log"
import json, sys
out = sys.argv[1]
ours = json.load(open(f"{out}/dtrain_memory_bf16_b256.json"))[0]
print(f"peak memory ResNet-50 bf16 b256, 1 GPU: dtrain {ours['peak_mem_bytes'] / 1e9:.2f} GB in use, "
      f"{ours['peak_reserved_bytes'] / 1e9:.2f} GB reserved, {ours['device_used_bytes'] / 1e9:.2f} GB cudaMemGetInfo "
      f"(predicted {ours['predicted_peak_bytes'] / 1e9:.2f} + workspace up to {ours['largest_workspace_bytes'] / 1e9:.3f})")
for mode in ("compile", "eager"):
    theirs = json.load(open(f"{out}/pytorch_memory_{mode}_bf16_b256.json"))
    print(f"  PyTorch {mode}: {theirs['peak_mem_bytes'] / 1e9:.2f} GB max_memory_allocated, "
          f"{theirs['peak_reserved_bytes'] / 1e9:.2f} GB max_memory_reserved; dtrain / PyTorch "
          f"{ours['peak_mem_bytes'] / theirs['peak_mem_bytes']:.3f}x allocated, "
          f"{ours['peak_reserved_bytes'] / theirs['peak_reserved_bytes']:.3f}x reserved")
PYEOF
    ;;
  compile)
    peer compile_bf16_b256 1 --precision bf16 --batch-per-rank 256 --mode compile
    ;;
  graphs)
    for b in 256 64 32; do
      for g in 0 1; do
        DTRAIN_CUDA_GRAPHS=$g ours graphs${g}_bf16_b$b 1 --precision bf16 --batch-per-rank $b --timing-warmup-steps 15 --steps 40
      done
    done
    if [ "$GPUS" -ge 2 ]; then
      for g in 0 1; do
        DTRAIN_CUDA_GRAPHS=$g ours graphs${g}_bf16_b64_np$GPUS "$GPUS" --precision bf16 --batch-per-rank 64 \
          --timing-warmup-steps 15 --steps 40 --world-sizes "$GPUS"
      done
    fi
    ;;
  scaling)
    ours bf16_b256_scaling "$GPUS" --precision bf16 --batch-per-rank 256 --timing-warmup-steps 15 --steps 40 --world-sizes "1,$GPUS"
    peer ddp1_bf16_b256 1 --precision bf16 --batch-per-rank 256 --mode eager
    peer ddp${GPUS}_bf16_b256 "$GPUS" --precision bf16 --batch-per-rank 256 --mode eager
    # The peer a performance-minded user compares against: torch.compile, 1 GPU and DDP.
    peer compile1_bf16_b256 1 --precision bf16 --batch-per-rank 256 --mode compile
    peer ddp${GPUS}_compile_bf16_b256 "$GPUS" --precision bf16 --batch-per-rank 256 --mode compile
    bench/plot_if_possible.sh "$OUT/dtrain_bf16_b256_scaling.png" "$OUT/dtrain_bf16_b256_scaling.json"
    ;;
esac
