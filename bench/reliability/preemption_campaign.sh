#!/bin/bash
# The preemption campaign under the real Slurm: a private one-node Slurm (2 CPUs,
# tests/cluster/slurm_cluster.sh) is started once; cluster/slurm/resnet50_imagenet.sbatch (the
# user-facing script, --requeue --open-mode=append) trains a small ResNet on synthetic data for 2
# epochs (384 steps), first uninterrupted (the reference), then TRIALS times (default 5), each
# signalled at a random moment of its training (after a random logged step, plus 0-0.5 s),
# alternately:
#   TERM: preempted by a job of a higher-priority partition (PreemptType=preempt/partition_prio,
#         PreemptMode=REQUEUE, GraceTime=60): Slurm sends the job's tasks SIGCONT and SIGTERM;
#   USR1: `scancel --signal=USR1`, every step of the job, as --signal=USR1@120 does before --time.
# Every trial must: stop on that signal at a step boundary with a checkpoint, exit 75 on its first
# attempt, be requeued by the script (PENDING again, Restarts=1), resume from that checkpoint, end
# COMPLETED 0:0, with final tensors byte-identical to the reference's.
# Writes $OUT/trials.tsv, $OUT/summary.md and the jobs' output files ($OUT/logs).
#   bench/reliability/preemption_campaign.sh [TRIALS]
#   (BIN=build/bin, OUT=bench/results/2026-11-23_cpu/reliability/preemption, SEED=random)
set -euo pipefail
TRIALS=${1:-5}
src=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$(cd "${BIN:-$src/build/bin}" && pwd)
OUT=${OUT:-$src/bench/results/2026-11-23_cpu/reliability/preemption}
SEED=${SEED:-$RANDOM}
[[ $TRIALS =~ ^[1-9][0-9]*$ ]] || { echo "TRIALS must be a whole number from 1, got '$TRIALS'" >&2; exit 2; }
source "$src/tests/cluster/slurm_cluster.sh"
if reason=$(slurm_cluster_unavailable); then echo "no private Slurm here: $reason" >&2; exit 2; fi

work=$(mktemp -d /tmp/dtrain-preemption.XXXXXX)
chmod 755 "$work"
trap 'status=$?; slurm_cluster_stop; ((status == 0)) || slurm_cluster_show_logs; rm -rf "$work"' EXIT
slurm_cluster_start "$work" || { echo "$slurm_cluster_error" >&2; exit 2; }
mkdir -p "$OUT/logs"
rm -f "$OUT"/logs/*.out
now() { date +%s.%N; }
seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
dtrain_preemption_config > "$work/small.pbtxt"
echo "slurm up ($(sinfo --version)); srun MPI plugins: $(srun --mpi=list 2>&1 | grep -o pmix | head -1 || echo none); seed $SEED"

# The reference: the same job, never signalled.
submitted=$(now)
id=$(dtrain_submit_sbatch_script reference "$work/reference" "$work/small.pbtxt" "$src" "$BIN")
state=$(slurm_wait_job "$id" 600) || true
reference_s=$(seconds_since "$submitted")
cp "$work/reference-$id.out" "$OUT/logs/reference.out"
reference=$(dtrain_final_checkpoint "$work/reference")
if [[ $state != COMPLETED || $reference != */ckpt-$dtrain_preemption_final_step-*.dtrain ]]; then
  echo "the reference job ended $state with final checkpoint '$reference'" >&2
  exit 1
fi
reference_loss0=$(grep -Eo "epoch 0: train loss [0-9.]+" "$work/reference-$id.out" | tail -1 | awk '{print $NF}')
echo "reference: job $id, $reference_s s, final ${reference##*/}"

printf "trial\tsignal\thow\tafter_step\tdelay_s\tstopped_by\tstop_step\tstop_epoch\tfirst_exit\trequeued\tstates\trestarts\tresumed_step\tstate\texit\tfinal\tidentical\tjob_s\tepoch0_train_loss\n" \
  > "$OUT/trials.tsv"
RANDOM=$SEED
steps=$dtrain_preemption_steps_per_epoch
for ((t = 1; t <= TRIALS; t++)); do
  if ((t % 2)); then signal=TERM how=preempted-by-urgent-job; else signal=USR1 how=scancel-signal-usr1; fi
  # The moment, by the run's own progress (a machine's load changes how long a step takes): once
  # rank 0 has logged step AFTER (a random multiple of the log interval, 8, from 16 to 85% of the
  # run; the step of an epoch's end too, when the signal lands in its evaluation and checkpoint),
  # a further 0-0.5 s, so that it falls anywhere in a step.
  after=$(((16 + RANDOM % (dtrain_preemption_final_step * 85 / 100 - 16)) / 8 * 8))
  epoch=$(((after - 1) / steps)) in_epoch=$(((after - 1) % steps + 1))
  delay=$(awk -v r="$RANDOM" 'BEGIN { printf "%.2f", 0.5 * r / 32767 }')
  dir=$work/trial_$t
  submitted=$(now)
  id=$(dtrain_submit_sbatch_script "trial_$t" "$dir" "$work/small.pbtxt" "$src" "$BIN" --requeue --open-mode=append)
  out=$work/trial_$t-$id.out
  states="(not signalled)"
  urgent=""
  if slurm_wait_output "$id" "$out" "epoch $epoch step $in_epoch/$steps " 600; then
    sleep "$delay"
    if [[ $signal == TERM ]]; then urgent=$(slurm_preempt_with_urgent_job); else scancel --signal=USR1 "$id" || true; fi
    states=$(slurm_watch_job "$id" 600) || true
  fi
  slurm_wait_job "$id" 600 > /dev/null || true
  job_s=$(seconds_since "$submitted")
  if [[ -n $urgent ]]; then slurm_wait_job "$urgent" 120 > /dev/null || true; fi
  cp "$out" "$OUT/logs/trial_$t.out"
  dtrain_read_preempted_run "$id" "$out" "$dir" "$reference"
  loss0=$(grep -Eo "epoch 0: train loss [0-9.]+" "$out" | tail -1 | awk '{print $NF}')
  row=("$t" "SIG$signal" "$how" "$after" "$delay" "${run_stop_signal:--}" "${run_stop_step:--}" "${run_stop_epoch:--}"
       "${run_first_exit:--}" "$run_requeued" "${states// /,}" "${run_restarts:--}" "${run_resumed_step:--}" "$run_state"
       "$run_exit" "${run_final:--}" "$run_identical" "$job_s" "${loss0:--}")
  (IFS=$'\t'; echo "${row[*]}") >> "$OUT/trials.tsv"
  echo "trial $t: SIG$signal $delay s after step $after: stopped at step ${run_stop_step:-?} (epoch ${run_stop_epoch:-?}), first exit" \
    "${run_first_exit:-?}, requeued $run_requeued, states $states, resumed from ${run_resumed_step:-?}, $run_state $run_exit," \
    "identical $run_identical, $job_s s"
done
# The urgent jobs must have run too (each preempted the trial it was submitted against).
urgent_ok=$(squeue -h -t all -n urgent -o %T 2>/dev/null | sort | uniq -c | tr '\n' ' ')

python3 - "$OUT/trials.tsv" "$dtrain_preemption_final_step" "$SEED" "$reference_s" "${reference##*/}" "$reference_loss0" "$urgent_ok" \
  "dtrain-train of $(date -u -r "$BIN/dtrain-train" '+%F %T UTC'), scripts at $(git -C "$src" rev-parse --short HEAD)$(git -C "$src" diff --quiet HEAD -- \
    bench/reliability/preemption_campaign.sh tests/cluster cluster/slurm || echo " + uncommitted changes")" \
  "$(sinfo --version)" > "$OUT/summary.md" <<'PYEOF'
import csv, sys
path, final_step, seed, ref_s, ref_final, ref_loss0, urgent, build, slurm = sys.argv[1:10]
rows = list(csv.DictReader(open(path), delimiter="\t"))
n = len(rows)
def count(pred): return sum(1 for r in rows if pred(r))
checks = [
    # Slurm signals every task: rank 0 may log that another rank had it first.
    ("stopped on its signal at a step boundary, checkpoint written",
     lambda r: r["stopped_by"] in (r["signal"], "other-rank") and r["stop_step"] != "-"),
    ("first attempt exited 75", lambda r: r["first_exit"] == "75"),
    ("requeued by the sbatch script", lambda r: r["requeued"] == "yes"),
    ("back through PENDING to RUNNING", lambda r: "PENDING,RUNNING" in r["states"]),
    ("Restarts=1 (attempt 2 ran with SLURM_RESTART_COUNT=1)", lambda r: r["restarts"] == "1"),
    ("resumed from the stop's checkpoint (no step lost or redone)", lambda r: r["resumed_step"] == r["stop_step"] != "-"),
    (f"ended COMPLETED 0:0 at step {final_step}", lambda r: r["state"] == "COMPLETED" and r["exit"] == "0:0" and r["final"].startswith(f"ckpt-{final_step}-")),
    ("final tensors byte-identical to the reference", lambda r: r["identical"] == "yes"),
]
passed = count(lambda r: all(check(r) for _, check in checks))
print(f"# preemption campaign under Slurm: {n} trials, {passed} of {n} pass every check")
print(f"{build}; {slurm}; seed {seed}; reference (uninterrupted) job {ref_s} s, final {ref_final}")
print()
for name, check in checks:
    print(f"- {name}: {count(check)} of {n}")
steps = [int(r["stop_step"]) for r in rows if r["stop_step"] != "-"]
if steps:
    print("- signalled after step -> stopped at step: " + ", ".join(
        f"{r['after_step']} +{r['delay_s']} s -> {r['stop_step']} ({r['signal']}, epoch {r['stop_epoch']})" for r in rows))
jobs = [float(r["job_s"]) for r in rows]
print(f"- job wall time, submission to COMPLETED (both attempts and the ~5 s requeue delay): {min(jobs):.1f}-{max(jobs):.1f} s")
print(f"- urgent (preempting) jobs by state: {urgent.strip() or 'none'}")
print(f"- epoch 0's logged train loss: reference {ref_loss0}; trials {', '.join(r['epoch0_train_loss'] for r in rows)} "
      "(a resumed epoch's mean covers only the steps after the resume; parameters are identical)")
PYEOF
cat "$OUT/trials.tsv" "$OUT/summary.md"
grep -q " $TRIALS of $TRIALS pass every check" "$OUT/summary.md"
