#!/usr/bin/env bash
# Real Slurm on this machine: starts munged, slurmctld and slurmd for a one-node cluster
# (localhost, 2 CPUs; tests/cluster/slurm_cluster.sh) in a private directory, then submits with sbatch:
#   1. dtrain-run -np 2 dtrain-train, a short Fashion-MNIST run: the job must be COMPLETED and its
#      output must hold the accuracy line;
#   2. dtrain-run -np 2 with rank 1 exiting 3: the job must end at once as FAILED with exit code 3
#      and output naming rank 1;
#   3. cluster/slurm/resnet50_imagenet.sbatch's launch inside the allocation (DTRAIN_DRY_RUN=1);
#   4. preemption: the same sbatch script trains a small ResNet on synthetic data
#      for 2 epochs, uninterrupted (the reference), then again, preempted mid-epoch 0 by a job of a
#      higher-priority partition (PreemptMode=REQUEUE, GraceTime: Slurm sends the tasks SIGTERM).
#      The job must stop at a step boundary with a checkpoint, exit 75, be requeued by the script
#      (back through PENDING, Restarts=1), resume from that checkpoint, end COMPLETED, and its
#      final tensors must be byte-identical to the reference's;
#   5. SIGUSR1 to the batch shell only (`scancel --batch`, as --signal=B:USR1@... sends it): the
#      script must pass it on to the ranks, which stop with a checkpoint, and requeue the job; then
#      scancel while attempt 2 trains: the job must stay CANCELLED (the ranks stop at a step with a
#      checkpoint and exit 75 here too, and the script must not turn the cancel into a requeue);
#   6. cluster/slurm/smoke_test.sbatch: dtrain-info and 100 steps, a metrics file and a checkpoint.
# Stops the daemons by their pids at the end, whatever happened.
# Usage: slurm_test.sh BIN_DIR SOURCE_DIR. Exits 77 (ctest's skip), saying why, only when the
# daemons are not installed or cannot start on this host.
set -euo pipefail
bin=$1 src=$2
source "$src/tests/cluster/slurm_cluster.sh"

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
reason=$(slurm_cluster_unavailable) && skip "$reason"

work=$(mktemp -d /tmp/dtrain-slurm.XXXXXX)
chmod 755 "$work"
trap 'status=$?; slurm_cluster_stop; ((status == 0 || status == 77)) || slurm_cluster_show_logs; rm -rf "$work"' EXIT
slurm_cluster_start "$work" || skip "$slurm_cluster_error"
echo "slurm up: $(sinfo -h -o '%P %D %t %c' | tr '\n' ' ')($(sinfo --version)); srun MPI plugins: $(srun --mpi=list 2>&1 | tr '\n' ' ')"

# Submits SCRIPT (text) as a 2-task job and waits for it to end; prints "STATE EXITCODE".
submit_and_wait() {
  local name=$1 script=$2 id state code
  id=$(slurm_submit "$name" "$script") || fail "sbatch refused job $name"
  state=$(slurm_wait_job "$id" 600) || fail "job $name ($id) did not end in 600 s: $state"
  code=$(slurm_job_field "$id" ExitCode)
  echo "--- job $name ($id): $state, exit code $code" >&2
  cat "$work/$name-$id.out" >&2
  cp "$work/$name-$id.out" "$work/$name.out"
  echo "$state $code"
}

echo "== 1. sbatch: dtrain-run -np 2 dtrain-train (Fashion-MNIST, 60 steps)"
result=$(submit_and_wait train "#!/bin/bash
exec $bin/dtrain-run -np 2 -- $bin/dtrain-train --config $src/configs/fashion_mnist_resnet.pbtxt --epochs 1 \
  --max_steps_per_epoch 60 --max_validation_batches 20 --log_every_steps 20 --backend mpi-ring")
[[ $result == "COMPLETED 0:0" ]] || fail "training job ended '$result', expected 'COMPLETED 0:0'"
grep -Eq "epoch 0: .*validation loss [0-9.]+ top-1 [0-9.]+%" "$work/train.out" || fail "no accuracy line in the job's output"
grep -q "2 ranks\|world size 2" "$work/train.out" || fail "the job did not train on 2 ranks"

echo "== 2. sbatch: rank 1 exits 3"
start=$SECONDS
result=$(submit_and_wait abort "#!/bin/bash
exec $bin/dtrain-run -np 2 -- $src/tests/support/fail_on_rank.sh 1 3")
elapsed=$((SECONDS - start))
[[ $result == "FAILED 3:0" ]] || fail "failing job ended '$result', expected 'FAILED 3:0'"
grep -Eq "rank 1|task 1" "$work/abort.out" || fail "the job's output does not name rank 1"
((elapsed < 30)) || fail "the job took $elapsed s to end after rank 1 failed (the other rank sleeps 60 s)"
echo "ended in ${elapsed} s"

echo "== 3. cluster/slurm/resnet50_imagenet.sbatch inside an allocation (dry run)"
result=$(submit_and_wait imagenet_dry_run "#!/bin/bash
DTRAIN_DRY_RUN=1 DTRAIN_DATA_DIR=/datasets/imagenet DTRAIN_BIN=$bin DTRAIN_CONFIG=$src/configs/resnet50_imagenet.pbtxt \
  DTRAIN_RUN_DIR=$work/run exec bash $src/cluster/slurm/resnet50_imagenet.sbatch")
[[ $result == "COMPLETED 0:0" ]] || fail "dry-run job ended '$result'"
grep -Eq "^(srun --mpi=pmix --ntasks 2 --kill-on-bad-exit=1|mpirun -np 2 ).*dtrain-train --config .*resnet50_imagenet.pbtxt --data_dir /datasets/imagenet --checkpoint_dir $work/run" \
  "$work/imagenet_dry_run.out" || fail "the sbatch script did not launch dtrain-train over the allocation's 2 tasks"

echo "== 4. preemption: the sbatch script's run, uninterrupted (reference), then preempted mid-epoch 0"
dtrain_preemption_config > "$work/small.pbtxt"
start=$SECONDS
id=$(dtrain_submit_sbatch_script reference "$work/reference" "$work/small.pbtxt" "$src" "$bin") ||
  fail "sbatch refused the reference job"
state=$(slurm_wait_job "$id" 300) ||
  { cat "$work/reference-$id.out"; fail "the reference job did not end in 300 s ($state)"; }
grep -v " step [0-9]*/$dtrain_preemption_steps_per_epoch " "$work/reference-$id.out"
[[ "$state $(slurm_job_field "$id" ExitCode)" == "COMPLETED 0:0" ]] || fail "the reference job ended $state"
reference=$(dtrain_final_checkpoint "$work/reference")
[[ $reference == */ckpt-$dtrain_preemption_final_step-*.dtrain ]] ||
  fail "the reference's final checkpoint is '$reference', expected ckpt-$dtrain_preemption_final_step-*"
echo "reference: $((SECONDS - start)) s"

# Job 4: preempted mid-epoch 0 by a job of partition urgent (SIGTERM to the tasks).
start=$SECONDS
id=$(dtrain_submit_sbatch_script preempted "$work/preempted" "$work/small.pbtxt" "$src" "$bin" --requeue \
  --open-mode=append) ||
  fail "sbatch refused job preempted"
out=$work/preempted-$id.out
slurm_wait_output "$id" "$out" "epoch 0 step 24/$dtrain_preemption_steps_per_epoch " 300 ||
  { cat "$out"; fail "job preempted did not reach step 24 of epoch 0"; }
urgent=$(slurm_preempt_with_urgent_job) || fail "sbatch refused the urgent job"
states=$(slurm_watch_job "$id" 600) || { cat "$out"; fail "job preempted did not end in 600 s (states: $states)"; }
grep -v " step [0-9]*/$dtrain_preemption_steps_per_epoch " "$out"
echo "states after the urgent job's submission: $states"
[[ $(slurm_wait_job "$urgent" 60) == COMPLETED ]] || fail "the urgent job $urgent did not complete"
dtrain_read_preempted_run "$id" "$out" "$work/preempted" "$reference"
# Slurm signals both tasks; rank 0 may find rank 1 had it first ("on another rank").
[[ ($run_stop_signal == SIGTERM || $run_stop_signal == other-rank) && $run_stop_epoch == 0 ]] ||
  fail "no 'stopped by a stop signal (SIGTERM or on another rank) at step N (epoch 0' line"
[[ $run_first_exit == 75 && $run_requeued == yes ]] ||
  fail "the first attempt exited '$run_first_exit' (requeued: $run_requeued), expected 75 and a requeue by the script"
[[ $states =~ PENDING\ RUNNING ]] || fail "the job did not go back through PENDING to RUNNING (states: $states)"
[[ $run_attempts == 2 && $run_restarts == 1 ]] ||
  fail "$run_attempts attempts logged, Restarts=$run_restarts; expected 2 and 1 (attempt 2 = SLURM_RESTART_COUNT 1)"
[[ $run_resumed_step == "$run_stop_step" ]] ||
  fail "resumed from step '$run_resumed_step', expected the stop's checkpoint at step $run_stop_step"
[[ "$run_state $run_exit" == "COMPLETED 0:0" ]] || fail "the job ended $run_state $run_exit, expected COMPLETED 0:0"
[[ $run_final == ckpt-$dtrain_preemption_final_step-* ]] ||
  fail "final checkpoint '$run_final', expected ckpt-$dtrain_preemption_final_step-*"
[[ $run_identical == yes ]] || fail "the final tensors differ from the uninterrupted run's"
echo "stopped ($run_stop_signal) at step $run_stop_step, exit 75, requeued, resumed from step $run_resumed_step, COMPLETED," \
  "final tensors identical to the reference ($((SECONDS - start)) s)"

echo "== 5. SIGUSR1 to the batch shell only (--signal=B:USR1@..., scancel --batch): passed on, exit 75, requeued;"
echo "      then scancel while attempt 2 trains: the job stays CANCELLED"
# Job 4 showed the resume to identical parameters; this checks the script's own signal handling.
id=$(dtrain_submit_sbatch_script batch_signalled "$work/batch_signalled" "$work/small.pbtxt" "$src" "$bin" --requeue \
  --open-mode=append) || fail "sbatch refused job batch_signalled"
out=$work/batch_signalled-$id.out
slurm_wait_output "$id" "$out" "epoch 0 step 16/$dtrain_preemption_steps_per_epoch " 300 ||
  { cat "$out"; fail "job batch_signalled did not reach step 16"; }
scancel --batch --signal=USR1 "$id"
slurm_wait_output "$id" "$out" "^job $id attempt 2 on " 300 ||
  { cat "$out"; fail "job batch_signalled did not start again"; }
dtrain_read_preempted_run "$id" "$out" "$work/batch_signalled" "$reference"
grep -q "the batch shell got SIGUSR1: passing it on to the ranks" "$out" ||
  fail "the sbatch script did not say it passed the batch shell's SIGUSR1 on"
[[ ($run_stop_signal == SIGUSR1 || $run_stop_signal == other-rank) && $run_first_exit == 75 && $run_requeued == yes &&
   $run_restarts == 1 ]] ||
  fail "stopped by '$run_stop_signal', first attempt exited '$run_first_exit', requeued $run_requeued," \
    "Restarts=$run_restarts; expected SIGUSR1, 75, yes, 1"
# Two logged steps on from the stop: attempt 2 trains (its stop signals are handled).
step=$(((run_stop_step / 8 + 2) * 8))
slurm_wait_output "$id" "$out" "epoch 0 step $step/$dtrain_preemption_steps_per_epoch " 300 ||
  { cat "$out"; fail "attempt 2 of job batch_signalled did not reach step $step"; }
scancel "$id"
state=$(slurm_wait_job "$id" 120) || fail "job batch_signalled was not cancelled in 120 s"
grep -v " step [0-9]*/$dtrain_preemption_steps_per_epoch " "$out"
[[ $state == CANCELLED && $(slurm_job_field "$id" Restarts) == 1 ]] ||
  fail "the cancelled job is $state with Restarts=$(slurm_job_field "$id" Restarts), expected CANCELLED and 1 (not requeued)"
# The ranks have stopped at a step with a checkpoint after scancel's SIGTERM in every run here
# (srun's own SIGKILL on TERM did not overtake them, as it does after scancel --full); where they
# did, the script must say why it did not requeue.
if grep -Eq "stopped by a stop signal \((SIGTERM|on another rank)\) at step [0-9]+ .*checkpoint written" "$out"; then
  grep -q "stopped at a checkpoint while Slurm ends it (JobState=COMPLETING" "$out" ||
    fail "the sbatch script did not say why it did not requeue the cancelled job"
else
  echo "note: attempt 2 did not stop at a step on scancel's SIGTERM (ended without a checkpoint)"
fi

echo "== 6. sbatch cluster/slurm/smoke_test.sbatch itself (its #SBATCH lines on a node without GPUs)"
id=$(cd "$slurm_cluster_work" && DTRAIN_BIN=$bin DTRAIN_CONFIG=$src/cluster/slurm/smoke_test.pbtxt \
  DTRAIN_RUN_DIR=$work/smoke DTRAIN_EXTRA_ARGS='--device cpu --backend mpi-ring' \
  sbatch --parsable --nodes=1 --ntasks-per-node=2 --output="$work/smoke.out" "$src/cluster/slurm/smoke_test.sbatch") ||
  fail "sbatch refused cluster/slurm/smoke_test.sbatch"
state=$(slurm_wait_job "$id" 300) || fail "the smoke job ($id) did not end in 300 s: $state (pending on its #SBATCH lines?)"
result="$state $(slurm_job_field "$id" ExitCode)"
cat "$work/smoke.out"
[[ $result == "COMPLETED 0:0" ]] || fail "smoke job ended '$result', expected 'COMPLETED 0:0'"
grep -q "2 ranks on 1 node" "$work/smoke.out" || fail "the smoke job's dtrain-info did not report its 2 ranks"
grep -q "epoch 0 step 100/" "$work/smoke.out" || fail "the smoke job did not train 100 steps"
grep -q "smoke test passed" "$work/smoke.out" || fail "the smoke job did not say it passed"
[[ -s $work/smoke/metrics.jsonl ]] && ls "$work"/smoke/ckpt-100-*.dtrain > /dev/null ||
  fail "the smoke job left no metrics file or no step-100 checkpoint in its run directory"
echo "PASS"
