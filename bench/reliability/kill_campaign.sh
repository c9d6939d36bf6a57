#!/bin/bash
# The kill campaign on CPU: TRIALS times (default 20), a 2-rank dtrain-train run (small
# ResNet, synthetic data, a checkpoint every 2 steps) loses a random rank to SIGKILL at a random
# moment (loading, forward/backward, the all-reduce, a checkpoint write: whatever it is doing
# then). Each trial records how long the job took to end after the kill, whether the output names
# the lost rank, and what `--resume latest` then does (it must load a valid checkpoint or start
# fresh, never accept a damaged one, and finish). Writes $OUT/trials.tsv and $OUT/summary.md.
#   bench/reliability/kill_campaign.sh [TRIALS]      (BIN=build/bin, OUT=/tmp/kill_campaign)
set -u
TRIALS=${1:-20}
BIN=${BIN:-build/bin}
OUT=${OUT:-/tmp/kill_campaign}
mkdir -p "$OUT"
MPI=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && MPI+=(--allow-run-as-root)
TRAIN=("$BIN/dtrain-train" --model small-resnet --blocks_per_stage 1,1 --width 8 --image_size 16
       --synthetic_samples 3072 --batch_per_rank 16 --epochs 3 --log_every_steps 8 --checkpoint_every_steps 2
       --max_validation_batches 1)
source "$(dirname "$0")/campaign_lib.sh"
printf "trial\tkilled_rank\tkill_after_s\tended_after_kill_s\texit\tnamed\ttmp_left\tresume_exit\tresumed_from\n" > "$OUT/trials.tsv"
for ((t = 1; t <= TRIALS; t++)); do
  dir=$OUT/trial_$t
  rm -rf "$dir"
  mkdir -p "$dir"
  "${MPI[@]}" -np 2 "${TRAIN[@]}" --checkpoint_dir "$dir/ckpt" > "$dir/run.log" 2>&1 &
  launcher=$!
  delay=$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.2f", 0.3 + 5.5 * rand() }')
  rank=$((RANDOM % 2))
  sleep "$delay"
  pid=$(rank_pid "$BIN" "$rank")
  if [ -z "$pid" ]; then
    wait "$launcher"
    printf "%d\t%d\t%s\t-\t%s\t-\t-\t-\t(run ended before the kill)\n" "$t" "$rank" "$delay" "$?" >> "$OUT/trials.tsv"
    continue
  fi
  killed=$(now)
  kill -9 "$pid"
  wait_job "$launcher" "$BIN"
  code=$JOB_STATUS
  ended=$(awk -v a="$killed" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
  named=no
  grep -Eq "rank $rank .*(signal 9|Killed)|process rank $rank " "$dir/run.log" && named=yes
  # A write the kill interrupted leaves its temporary file; the next run removes it.
  tmp_left=$(ls "$dir"/ckpt/*.tmp 2>/dev/null | wc -l)
  "${MPI[@]}" -np 2 "${TRAIN[@]}" --checkpoint_dir "$dir/ckpt" --resume latest > "$dir/resume.log" 2>&1
  resume_exit=$?
  from=$(grep -Eo "resum[a-z]* [^,;]*(step|ckpt)[^,;]*" "$dir/resume.log" | head -1)
  [ -z "$from" ] && from=$(grep -Eo "no checkpoint[^;]*" "$dir/resume.log" | head -1)
  printf "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$t" "$rank" "$delay" "$ended" "$code" "$named" "$tmp_left" "$resume_exit" "${from:-?}" \
    >> "$OUT/trials.tsv"
done
python3 - "$OUT/trials.tsv" > "$OUT/summary.md" <<'PYEOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
killed = [r for r in rows if r["ended_after_kill_s"] != "-"]
ends = [float(r["ended_after_kill_s"]) for r in killed]
print(f"# kill campaign: {len(rows)} trials, {len(killed)} with a kill")
if ends:
    print(f"- job ended after the kill: max {max(ends):.2f} s, mean {sum(ends)/len(ends):.2f} s (bound 60 s)")
print(f"- lost rank named: {sum(r['named'] == 'yes' for r in killed)} of {len(killed)}")
print(f"- job exit status non-zero: {sum(r['exit'] not in ('0', 'timeout') for r in killed)} of {len(killed)}")
print(f"- killed during a checkpoint write (a .tmp left): {sum(r['tmp_left'] not in ('0', '-') for r in killed)} of {len(killed)}")
print(f"- --resume latest then finished the run (exit 0): {sum(r['resume_exit'] == '0' for r in killed)} of {len(killed)}")
PYEOF
cat "$OUT/trials.tsv" "$OUT/summary.md"
