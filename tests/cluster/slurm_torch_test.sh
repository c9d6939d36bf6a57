#!/usr/bin/env bash
# dtrain.torch under real Slurm (the private one-node cluster of tests/cluster/slurm_cluster.sh), as
# docs/python.md launches it: sbatch jobs of 2 tasks running tests/python/launcher_test.py, which
# checks rank, size and local rank against the launcher's and one DistributedOptimizer step against
# one process with every rank's batch:
#   1. srun --mpi=pmix in the batch script: the job must be COMPLETED 0:0, the ranks' view srun's;
#   2. dtrain-run -np 2 in the batch script (it picks srun or mpirun itself): COMPLETED 0:0;
#   3. mpirun -np 2 in the batch script (Open MPI reads the allocation): COMPLETED 0:0;
#   4. srun, the last rank raising while rank 0 waits in an allreduce: the job must end FAILED 1:0
#      at once (not at the time limit), its output naming the rank and the exception;
#   5. the same under dtrain-run.
# Usage: slurm_torch_test.sh BIN_DIR SOURCE_DIR LIBRARY (libdtrain.so.1). Exits 77 (ctest's skip),
# saying why, when PyTorch is missing or the Slurm daemons are not installed or cannot start here.
set -euo pipefail
bin=$1 src=$2 library=$3
python=/usr/bin/python3
source "$src/tests/cluster/slurm_cluster.sh"

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
reason=$(slurm_cluster_unavailable) && skip "$reason"
$python -c "import torch" 2>/dev/null || skip "$python has no PyTorch (Debian: apt-get install python3-torch)"

work=$(mktemp -d /tmp/dtrain-slurm-torch.XXXXXX)
chmod 755 "$work"
trap 'status=$?; slurm_cluster_stop; ((status == 0 || status == 77)) || slurm_cluster_show_logs; rm -rf "$work"' EXIT
slurm_cluster_start "$work" || skip "$slurm_cluster_error"

# What every job script starts with: #SBATCH lines and the package and library named, as
# docs/python.md's job script has them.
prologue="#!/bin/bash
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --time=5:00
export PYTHONPATH=$src/python:$src/tests/python DTRAIN_LIBRARY=$library PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
cd $work"
test_script=$src/tests/python/launcher_test.py

# Submits SCRIPT as a 2-task job named NAME and waits (120 s) for it to end; prints "STATE EXITCODE
# SECONDS" and leaves the job's output in WORK/NAME.out.
run_job() {
  local name=$1 script=$2 id state start=$SECONDS
  id=$(slurm_submit "$name" "$script") || fail "sbatch refused job $name"
  state=$(slurm_wait_job "$id" 120) || { cat "$work/$name-$id.out"; fail "job $name ($id) did not end in 120 s: $state"; }
  cp "$work/$name-$id.out" "$work/$name.out"
  echo "--- job $name ($id): $state, exit code $(slurm_job_field "$id" ExitCode), $((SECONDS - start)) s" >&2
  cat "$work/$name.out" >&2
  echo "$state $(slurm_job_field "$id" ExitCode) $((SECONDS - start))"
}

# A job that passed: COMPLETED 0:0, the verdict line, each rank's view of itself from LAUNCHER.
expect_passed() {
  local name=$1 launcher=$2 result=$3 r
  [[ $result == "COMPLETED 0:0 "* ]] || fail "job $name ended '${result% *}', expected 'COMPLETED 0:0'"
  grep -q "launcher_test: all checks passed on 2 rank(s)" "$work/$name.out" || fail "job $name did not pass its checks"
  for r in 0 1; do
    grep -Eq "launcher_test: rank $r of 2, local rank $r of 2; $launcher says rank $r of 2, local rank $r of 2" \
      "$work/$name.out" || fail "job $name: rank $r did not report itself as $launcher's rank $r of 2"
  done
}

# A job whose last rank raised: FAILED, in under 60 s (rank 0 would wait in its allreduce forever),
# naming the rank and the exception.
expect_failed() {
  local name=$1 result=$2
  [[ $result == "FAILED 1:0 "* ]] || fail "job $name ended '${result% *}', expected 'FAILED 1:0' (the rank's status)"
  ((${result##* } < 60)) || fail "job $name took ${result##* } s to end after rank 1 raised"
  grep -q "dtrain: rank 1 of 2: uncaught RuntimeError; ending every rank" "$work/$name.out" ||
    fail "job $name's output does not name rank 1 and its RuntimeError"
  grep -q "RuntimeError: a failure on the last rank" "$work/$name.out" || fail "job $name's output lacks the traceback"
}

echo "== 1. srun --mpi=pmix in an sbatch job"
if srun --mpi=list 2>&1 | grep -q pmix; then
  result=$(run_job srun "$prologue
exec srun --mpi=pmix --kill-on-bad-exit=1 $python $test_script check")
  expect_passed srun srun "$result"
else
  echo "note: this Slurm's srun has no PMIx plugin (srun --mpi=list), which Open MPI's ranks need under srun; skipped"
fi

echo "== 2. dtrain-run -np 2 in an sbatch job"
result=$(run_job dtrain_run "$prologue
exec $bin/dtrain-run -np 2 -x PYTHONPATH -x DTRAIN_LIBRARY -- $python $test_script check")
mode=srun
srun --mpi=list 2>&1 | grep -q pmix || mode=mpirun
expect_passed dtrain_run $mode "$result"

echo "== 3. mpirun -np 2 in an sbatch job"
result=$(run_job mpirun "$prologue
exec mpirun --allow-run-as-root -np 2 $python $test_script check")
expect_passed mpirun mpirun "$result"

echo "== 4. srun: the last rank raises while rank 0 waits"
if [[ $mode == srun ]]; then
  result=$(run_job srun_fail "$prologue
exec srun --mpi=pmix --kill-on-bad-exit=1 $python $test_script fail")
  expect_failed srun_fail "$result"
fi

echo "== 5. dtrain-run: the last rank raises while rank 0 waits"
result=$(run_job dtrain_run_fail "$prologue
exec $bin/dtrain-run -np 2 -x PYTHONPATH -x DTRAIN_LIBRARY -- $python $test_script fail")
expect_failed dtrain_run_fail "$result"
echo "PASS"
