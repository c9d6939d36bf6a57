#!/bin/bash
# How far the machine itself lets one-image-at-a-time JPEG decoding scale (issue 12's "85% of
# linear from 1 to 14 threads"): dtrain-bench-data single-threaded processes pinned with taskset,
#   - alone on CPU 0 (the 1-thread rate),
#   - two at once on CPU pairs (0,1), (0,2), (0,8), (0,16): a pair that loses rate shares a core
#     of the host (SMT siblings the VM does not show),
#   - N at once on CPUs 0..N-1 (independent processes: nothing of ours is shared),
# and then one process with N threads, unpinned and on CPUs 0..N-1. Logs under $OUT.
#   bench/probe_cpu_scaling.sh DATA_DIR [N]      (BIN=build/bin; DATA_DIR as for bench/run_data.sh)
set -u
DATA=${1:?usage: bench/probe_cpu_scaling.sh DATA_DIR [N]}
N=${2:-14}
OUT=${OUT:-/tmp/probe_cpu_scaling}
BIN=${BIN:-build/bin}
BATCHES=${BATCHES:-8}
mkdir -p "$OUT"
export DTRAIN_CPU_BINDING=keep  # taskset's mask is the experiment
SPLIT=$DATA
[ -d "$DATA/train" ] && SPLIT=$DATA/train
find "$SPLIT" -type f -print0 | xargs -0 cat > /dev/null
rate() {  # rate JSON: the img/s of its first row
  python3 -c 'import json,sys; print("%.1f" % json.load(open(sys.argv[1]))["rows"][0]["img_per_sec"])' "$1" 2>/dev/null || echo nan
}
run_pinned() {  # run_pinned NAME CPU: one single-threaded loader on CPU, in the background
  taskset -c "$2" "$BIN/dtrain-bench-data" --data-dir "$DATA" --loader-threads 1 --batch-per-rank 256 --batches "$BATCHES" \
    --metrics-file "$OUT/$1.json" > "$OUT/$1.log" 2>&1 &
}
{
  echo "# bench/probe_cpu_scaling.sh $DATA $N on $(hostname), $(nproc) CPUs, $(date -u +%FT%TZ)"
  run_pinned solo 0; wait
  solo=$(rate "$OUT/solo.json")
  echo "alone on CPU 0: $solo img/s"
  for other in 1 2 8 16; do
    run_pinned pair_a 0; run_pinned pair_b "$other"; wait
    echo "pair (0,$other): $(rate "$OUT/pair_a.json") and $(rate "$OUT/pair_b.json") img/s"
  done
  for ((i = 0; i < N; i++)); do run_pinned "proc_$i" "$i"; done; wait
  total=$(for ((i = 0; i < N; i++)); do rate "$OUT/proc_$i.json"; done | awk '{s += $1} END {printf "%.1f", s}')
  echo "$N independent processes on CPUs 0-$((N - 1)): $total img/s in total, $(awk -v t="$total" -v s="$solo" -v n="$N" 'BEGIN {printf "%.1f", 100 * t / (n * s)}')% of $N x alone"
  for pin in none "0-$((N - 1))"; do
    cmd=("$BIN/dtrain-bench-data" --data-dir "$DATA" --loader-threads "$N" --batch-per-rank 256 --batches $((BATCHES * 4)) --metrics-file "$OUT/threads_$pin.json")
    if [ "$pin" = none ]; then "${cmd[@]}" > "$OUT/threads_$pin.log" 2>&1; else taskset -c "$pin" "${cmd[@]}" > "$OUT/threads_$pin.log" 2>&1; fi
    t=$(rate "$OUT/threads_$pin.json")
    echo "one process, $N threads, CPUs ${pin/none/unpinned}: $t img/s, $(awk -v t="$t" -v s="$solo" -v n="$N" 'BEGIN {printf "%.1f", 100 * t / (n * s)}')% of $N x alone"
  done
} 2>&1 | tee "$OUT/probe.txt"
