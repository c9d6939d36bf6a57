#!/bin/bash
# The stall campaign on CPU: TRIALS times (default 5), a 2-rank dtrain-train run (small
# ResNet, synthetic data) loses a random rank to SIGSTOP at a random moment (a hung node: the
# process neither runs nor dies), from outside, wherever it is: in a gradient all-reduce, in the
# trainer's own collectives, computing, loading. With --stall_warning_seconds WARN and
# --stall_abort_seconds ABORT, each trial records whether the other rank's warning names the
# stopped rank and how long it had waited, and how long the job took to end after the stop.
# Writes $OUT/trials.tsv and $OUT/summary.md.
#   bench/reliability/stall_campaign.sh [TRIALS]   (BIN=build/bin, OUT=/tmp/stall_campaign, WARN=2, ABORT=6)
set -u
TRIALS=${1:-5}
BIN=${BIN:-build/bin}
OUT=${OUT:-/tmp/stall_campaign}
WARN=${WARN:-2}
ABORT=${ABORT:-6}
mkdir -p "$OUT"
MPI=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && MPI+=(--allow-run-as-root)
TRAIN=("$BIN/dtrain-train" --model small-resnet --blocks_per_stage 1,1 --width 8 --image_size 16
       --synthetic_samples 100000 --batch_per_rank 16 --epochs 100 --log_every_steps 8 --backend mpi-ring
       --stall_warning_seconds "$WARN" --stall_abort_seconds "$ABORT")
source "$(dirname "$0")/campaign_lib.sh"
printf "trial\tstopped_rank\tstop_after_s\twarning_names_it\twaited_at_warning_s\tcollective\taborted_after_waiting_s\tended_after_stop_s\texit\n" > "$OUT/trials.tsv"
for ((t = 1; t <= TRIALS; t++)); do
  dir=$OUT/trial_$t
  rm -rf "$dir"
  mkdir -p "$dir"
  "${MPI[@]}" -np 2 "${TRAIN[@]}" > "$dir/run.log" 2>&1 &
  launcher=$!
  delay=$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.2f", 3 + 4 * rand() }')
  rank=$((RANDOM % 2))
  other=$((1 - rank))
  sleep "$delay"
  pid=$(rank_pid "$BIN" "$rank")
  [ -z "$pid" ] && { echo "trial $t: rank $rank not found"; kill -9 "$launcher"; continue; }
  stopped=$(now)
  kill -STOP "$pid"
  wait_job "$launcher" "$BIN"
  code=$JOB_STATUS
  ended=$(awk -v a="$stopped" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
  warning=$(grep -E "\[[^]]*:$other/2\] WARN  stall: .*waiting for world rank\(s\) $rank: rank $rank on " "$dir/run.log" | head -1)
  named=no; waited=-; what=-
  if [ -n "$warning" ]; then
    named=yes
    waited=$(echo "$warning" | sed -n 's/.*has waited \([0-9.]*\) s.*/\1/p')
    what=$(echo "$warning" | sed -n 's/.*WARN  stall: \([^,(]*\).*/\1/p')
  fi
  abort=no
  error=$(grep -E "ERROR stall: .*waiting for world rank\(s\) $rank: .*aborting the job \(stall_abort_seconds $ABORT\)" "$dir/run.log" | head -1)
  [ -n "$error" ] && abort=$(echo "$error" | sed -n 's/.*has waited \([0-9.]*\) s.*/\1/p')
  printf "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$t" "$rank" "$delay" "$named" "$waited" "$what" "$abort" "$ended" "$code" >> "$OUT/trials.tsv"
  # mpirun's abort kills the stopped rank too; make sure nothing is left for the next trial.
  pkill -9 -f "$BIN/dtrain-train" 2>/dev/null
done
python3 - "$OUT/trials.tsv" "$WARN" "$ABORT" > "$OUT/summary.md" <<'PYEOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
warn, abort = float(sys.argv[2]), float(sys.argv[3])
print(f"# stall campaign: {len(rows)} trials, SIGSTOP of a random rank at a random moment")
print(f"(--stall_warning_seconds {warn:g} --stall_abort_seconds {abort:g})")
named = [r for r in rows if r["warning_names_it"] == "yes"]
print(f"- the waiting rank's warning named the stopped rank: {len(named)} of {len(rows)}")
if named:
    w = [float(r["waited_at_warning_s"]) for r in named]
    print(f"- waited at the warning: max {max(w):.1f} s (warning time {warn:g} s)")
aborted = [r for r in rows if r["aborted_after_waiting_s"] != "no"]
print(f"- stall error naming it, then the job aborted: {len(aborted)} of {len(rows)}", end="")
print(f", the error after waiting max {max(float(r['aborted_after_waiting_s']) for r in aborted):.1f} s" if aborted else "")
ends = [float(r["ended_after_stop_s"]) for r in rows]
print(f"- job ended after the stop: max {max(ends):.2f} s, mean {sum(ends)/len(ends):.2f} s (abort time {abort:g} s)")
print(f"- exit status non-zero: {sum(r['exit'] not in ('0', 'timeout') for r in rows)} of {len(rows)}")
kinds = sorted(set(r["collective"] for r in rows))
print(f"- where the other rank was waiting: {', '.join(kinds)}")
PYEOF
cat "$OUT/trials.tsv" "$OUT/summary.md"
