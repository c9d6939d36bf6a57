#!/bin/bash
# --timeline. A 2-rank CPU run records global steps 3 to 5 (a checkpoint falls
# on step 4, 8 gradient buckets of 1 MiB): rank 0 writes one Chrome trace JSON that python's json
# module loads, with every rank's tracks and every step's phases in order (scripts/check_timeline.py
# says which), and no temporary file left. Then rank 0 fails inside the range (an injected error in
# step 4's backward): the run ends with an error and rank 0 still leaves a valid file of what it
# recorded, marked incomplete.
#   timeline_test.sh MPIEXEC "MPI FLAGS" DTRAIN_TRAIN CHECK_TIMELINE_PY
set -u
mpiexec=$1
read -r -a mpi_flags <<<"$2"
train=$3
checker=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
args=(--model small-resnet --blocks_per_stage 1,1,1 --width 48 --image_size 8 --synthetic_samples 96
  --batch_per_rank 8 --epochs 1 --max-total-steps 5 --max-validation-batches 1 --log_every_steps 0
  --loader_threads 1 --bucket-mib 1 --device cpu --timeline out/trace.json --timeline-steps 3:5)

"$mpiexec" "${mpi_flags[@]}" -np 2 "$train" "${args[@]}" --checkpoint-dir ckpt --checkpoint-every-steps 4 \
  > run.log 2>&1
rc=$?
cat run.log
[ "$rc" = 0 ] || fail "the run exited $rc"
grep -Eq "INFO  timeline of steps 3-5 \(2 rank\(s\), [0-9]+ spans\) written to out/trace.json" run.log ||
  fail "no log line naming the timeline file"
[ -z "$(find . -name '*.tmp')" ] || fail "a temporary file was left: $(find . -name '*.tmp')"
size=$(stat -c %s out/trace.json)
echo "out/trace.json: $size bytes"
[ "$size" -lt 100000 ] || fail "3 steps of 2 ranks took $size bytes"
python3 "$checker" out/trace.json --ranks 2 --steps 3:5 --device cpu --checkpoint-step 4 ||
  fail "the timeline does not check"

# An error inside the range, on rank 0 only (the other rank waits in its all-reduce until the
# abort ends it).
rm -rf out
"$mpiexec" "${mpi_flags[@]}" -np 1 -x DTRAIN_FAULT_INJECT_BACKWARD=4 "$train" "${args[@]}" : \
  -np 1 "$train" "${args[@]}" > failed.log 2>&1
rc=$?
cat failed.log
[ "$rc" != 0 ] || fail "the run with an injected error exited 0"
grep -q "timeline: the run failed inside the range; this rank's [0-9]* span(s) written to out/trace.json" failed.log ||
  fail "rank 0 did not say it wrote its spans"
python3 "$checker" out/trace.json --ranks 2 --steps 3:5 --device cpu --partial-rank 0 ||
  fail "the timeline of the failed run does not check"
[ -z "$(find . -name '*.tmp')" ] || fail "a temporary file was left: $(find . -name '*.tmp')"
echo "PASS"
