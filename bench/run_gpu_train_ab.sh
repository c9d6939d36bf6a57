#!/bin/bash
# The same dtrain-bench-train run from two builds on one GPU, interleaved round by round, so a
# change that should not move the speed (a refactor) is judged against its parent in one call on
# one machine: each round runs A then B (odd rounds) or B then A (even rounds), and the summary
# gives each build's median images/s and B's difference from A.
#   bench/run_gpu_train_ab.sh BIN_A BIN_B [ROUNDS] [-- bench-train flags...]
#   (default flags: ResNet-50 bf16, batch 256, 15 warm-up and 40 timed steps; ROUNDS 3)
set -u
A=$1 B=$2
shift 2
ROUNDS=3
if [ $# -gt 0 ] && [ "$1" != "--" ]; then ROUNDS=$1; shift; fi
[ "${1:-}" = "--" ] && shift
FLAGS=("$@")
[ ${#FLAGS[@]} -gt 0 ] || FLAGS=(--precision bf16 --batch-per-rank 256 --timing-warmup-steps 15 --steps 40)
OUT=${OUT:-/tmp/dtrain_ab}
mkdir -p "$OUT"
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
export DTRAIN_PLAN_CACHE=${DTRAIN_PLAN_CACHE:-$OUT/plan_cache}
# Both binaries in one step mode (graphs, today's default, unless asked): a binary from before
# graphs were the default would otherwise run eager against the other's graphs.
export DTRAIN_CUDA_GRAPHS=${DTRAIN_CUDA_GRAPHS:-1}
nvidia-smi -L > "$OUT/gpus.txt"
run() {  # run LABEL BIN ROUND
  local log=$OUT/$1_round$3.log
  timeout 300 mpirun --allow-run-as-root -np 1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_PLAN_CACHE -x DTRAIN_CUDA_GRAPHS \
    "$2" --metrics-file "$OUT/$1_round$3.json" "${FLAGS[@]}" > "$log" 2>&1
  local rc=$?
  # The table's row for 1 GPU: "  1  <img/s/GPU>  <img/s total> ...".
  local rate
  rate=$(awk '$1 == 1 && $2 ~ /^[0-9.]+$/ {print $2}' "$log" | tail -1)
  echo "$1 round $3 rc $rc: ${rate:-none} img/s" | tee -a "$OUT/summary.txt"
  echo "${rate:-0}" >> "$OUT/$1.rates"
}
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then run A "$A" "$r"; run B "$B" "$r"; else run B "$B" "$r"; run A "$A" "$r"; fi
done
median() { sort -g "$1" | awk '{v[NR]=$1} END {print ((NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2)}'; }
ma=$(median "$OUT/A.rates") mb=$(median "$OUT/B.rates")
awk -v a="$ma" -v b="$mb" -v fa="$A" -v fb="$B" 'BEGIN {
  printf "median A (%s) %.1f img/s, B (%s) %.1f img/s, B - A %+.2f%%\n", fa, a, fb, b, (a > 0 ? 100 * (b - a) / a : 0) }' |
  tee -a "$OUT/summary.txt"
