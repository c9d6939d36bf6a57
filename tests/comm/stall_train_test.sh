#!/usr/bin/env bash
# A stopped rank in dtrain-train: rank 1 of a 2-rank CPU run stops its process
# (SIGSTOP, DTRAIN_FAULT_INJECT=K,1,stop) right as it begins its K-th gradient all-reduce, with
# --stall_warning_seconds 1 --stall_abort_seconds 3. Rank 0 must warn naming rank 1 within the
# warning time (+1 s), and the job must end with the stall error and a non-zero status within the
# abort time + 5 s of the stop.
# With VARIABLE=DTRAIN_FAULT_INJECT_TRAINER, rank 1 stops at the K-th of the trainer's own
# collectives instead (the loss all-gather, the stop agreement, the epoch totals), and the warning
# must name that one (WHAT, a regex).
# With SETTINGS=env the thresholds come from DTRAIN_STALL_WARNING_SECONDS / DTRAIN_STALL_ABORT_SECONDS
# instead of the flags (as dtrain-run forwards them), and rank 0's log must say so.
#   stall_train_test.sh MPIEXEC "MPI FLAGS" DTRAIN_TRAIN [VARIABLE K WHAT [SETTINGS]]
set -uo pipefail
mpiexec=$1
read -r -a mpi_flags <<< "$2"
train=$3
variable=${4:-DTRAIN_FAULT_INJECT}
at=${5:-20}
what=${6:-'mpi-ring all_reduce'}
settings=${7:-flags}
if [[ $settings == env ]]; then
  thresholds=(-x DTRAIN_STALL_WARNING_SECONDS=1 -x DTRAIN_STALL_ABORT_SECONDS=3)
  flags=()
else
  thresholds=()
  flags=(--stall_warning_seconds 1 --stall_abort_seconds 3)
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail() { echo "FAIL: $*"; cat "$log"; kill -9 "$launcher" 2>/dev/null; exit 1; }

timeout -s KILL 150 "$mpiexec" "${mpi_flags[@]}" -np 2 -x "$variable=$at,1,stop" "${thresholds[@]}" "$train" \
  --model small-resnet --blocks_per_stage 1 --width 4 --image_size 16 --synthetic_samples 100000 --batch_per_rank 8 \
  --epochs 100 --log-every-steps 5 --backend mpi-ring "${flags[@]}" > "$log" 2>&1 &
launcher=$!
stopped=""
while kill -0 "$launcher" 2>/dev/null; do
  if [[ -z $stopped ]] && grep -q "injected stall ($variable)" "$log"; then stopped=$(date +%s.%N); fi
  sleep 0.1
done
wait "$launcher"
status=$?
ended=$(date +%s.%N)
[[ -n $stopped ]] || fail "rank 1 never stopped"
elapsed=$(echo "$ended - $stopped" | bc)
echo "job ended ${elapsed} s after rank 1 stopped, exit status $status"
[[ $status -ne 0 ]] || fail "exit status 0"
line=$(grep -E '\[[^]]*:0/2\] WARN  stall: '"$what"'.*waiting for world rank\(s\) 1: rank 1 on \S+ did not answer' "$log" | head -1)
[[ -n $line ]] || fail "rank 0 logged no warning naming rank 1"
echo "$line"
waited=$(echo "$line" | sed -n 's/.*has waited \([0-9.]*\) s.*/\1/p')
(( $(echo "$waited <= 2" | bc) )) || fail "rank 0 warned after ${waited} s, warning time 1 s"
grep -E '\[[^]]*:0/2\] ERROR stall: .*waiting for world rank\(s\) 1: .*aborting the job \(stall_abort_seconds 3\)' "$log" ||
  fail "rank 0 logged no error naming rank 1 and the abort"
(( $(echo "$elapsed <= 8" | bc) )) || fail "the job ended ${elapsed} s after the stop, abort time 3 s"
if [[ $settings == env ]]; then
  grep -E 'stall inspector: warning 1 s \(DTRAIN_STALL_WARNING_SECONDS\), abort 3 s \(DTRAIN_STALL_ABORT_SECONDS\)' "$log" ||
    fail "rank 0 did not log that the thresholds came from the variables"
fi
echo PASS
