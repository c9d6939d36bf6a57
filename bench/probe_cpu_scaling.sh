#!/bin/bash
# How far the machine itself lets one-image-at-a-time JPEG decoding scale (the loader's bar is 85%
# of linear from 1 to 14 threads), with nothing of ours shared: dtrain-bench-data single-threaded
# processes pinned with taskset,
#   - REPEATS times, interleaved: one alone on CPU 0 (the 1-thread rate), then N at once on CPUs
#     0..N-1 (independent processes); each repeat's N-process total against N x its own alone rate,
#     since a shared VM's single-core rate drifts by 10-25% from minute to minute;
#   - two at once on the CPU pairs in PAIRS ((0,1), (0,2), (0,8), (0,16)): a pair that loses rate
#     shares a core of the host (SMT siblings the VM does not show);
# and then one process with N threads, unpinned and on CPUs 0..N-1. $OUT gets probe.txt and
# runs.tgz (every process's log and JSON).
#   bench/probe_cpu_scaling.sh DATA_DIR [N]      (DATA_DIR as for bench/run_data.sh)
# Environment: BIN (build/bin), BATCHES (8 per single-threaded process), REPEATS (3), PAIRS.
set -u
DATA=${1:?usage: bench/probe_cpu_scaling.sh DATA_DIR [N]}
N=${2:-14}
OUT=${OUT:-/tmp/probe_cpu_scaling}
BIN=${BIN:-build/bin}
BATCHES=${BATCHES:-8}
REPEATS=${REPEATS:-3}
PAIRS=${PAIRS:-1 2 8 16}
mkdir -p "$OUT"
export DTRAIN_CPU_BINDING=keep  # taskset's mask is the experiment
SPLIT=$DATA
[ -d "$DATA/train" ] && SPLIT=$DATA/train
find "$SPLIT" -type f -print0 | xargs -0 cat > /dev/null
rate() {  # rate JSON: the img/s of its first row
  python3 -c 'import json,sys; print("%.1f" % json.load(open(sys.argv[1]))["rows"][0]["img_per_sec"])' "$1" 2>/dev/null || echo nan
}
percent_of_n_alone() {  # percent_of_n_alone TOTAL ALONE: TOTAL against N x ALONE, in percent
  awk -v t="$1" -v s="$2" -v n="$N" 'BEGIN {printf "%.1f", 100 * t / (n * s)}'
}
run_pinned() {  # run_pinned NAME CPU: one single-threaded loader on CPU, in the background
  taskset -c "$2" "$BIN/dtrain-bench-data" --data-dir "$DATA" --loader-threads 1 --batch-per-rank 256 --batches "$BATCHES" \
    --rounds 1 --clock-probe-seconds 0 --metrics-file "$OUT/$1.json" > "$OUT/$1.log" 2>&1 &
}
{
  echo "# bench/probe_cpu_scaling.sh $DATA $N on $(hostname), $(nproc) CPUs, $(date -u +%FT%TZ), $BATCHES batches of 256 per process"
  solos=()
  for ((r = 1; r <= REPEATS; r++)); do
    run_pinned "solo_$r" 0; wait
    solo=$(rate "$OUT/solo_$r.json")
    solos+=("$solo")
    for ((i = 0; i < N; i++)); do run_pinned "proc_${r}_$i" "$i"; done; wait
    total=$(for ((i = 0; i < N; i++)); do rate "$OUT/proc_${r}_$i.json"; done | awk '{s += $1} END {printf "%.1f", s}')
    echo "repeat $r: alone on CPU 0 $solo img/s; $N independent processes on CPUs 0-$((N - 1)) $total img/s in total," \
      "$(percent_of_n_alone "$total" "$solo")% of $N x alone"
  done
  solo=$(printf '%s\n' "${solos[@]}" | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
  echo "alone on CPU 0, the median of $REPEATS: $solo img/s"
  for other in $PAIRS; do
    run_pinned pair_a 0; run_pinned pair_b "$other"; wait
    echo "pair (0,$other): $(rate "$OUT/pair_a.json") and $(rate "$OUT/pair_b.json") img/s"
  done
  for pin in none "0-$((N - 1))"; do
    cmd=("$BIN/dtrain-bench-data" --data-dir "$DATA" --loader-threads "$N" --batch-per-rank 256 --batches $((BATCHES * 4))
      --rounds 1 --clock-probe-seconds 0 --metrics-file "$OUT/threads_$pin.json")
    if [ "$pin" = none ]; then "${cmd[@]}" > "$OUT/threads_$pin.log" 2>&1; else taskset -c "$pin" "${cmd[@]}" > "$OUT/threads_$pin.log" 2>&1; fi
    t=$(rate "$OUT/threads_$pin.json")
    echo "one process, $N threads, CPUs ${pin/none/unpinned}: $t img/s," \
      "$(percent_of_n_alone "$t" "$solo")% of $N x the median alone rate"
  done
} 2>&1 | tee "$OUT/probe.txt"
# One archive instead of ~100 small files (a device run returns only so many).
(cd "$OUT" && tar czf runs.tgz solo_* proc_* pair_* threads_* && rm -f solo_* proc_* pair_* threads_*)
