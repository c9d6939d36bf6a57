#!/bin/bash
# --tensorboard_dir: a 2-rank run writes one event file (rank 0's), which reads back
# with its CRCs checked and holds the config as text, the train scalars at every progress line and
# the validation scalars at every epoch's end, at the global step; the summary names the file.
#   tensorboard_test.sh MPIEXEC "MPI FLAGS" DTRAIN_TRAIN DTRAIN_READ_TENSORBOARD
set -u
mpiexec=$1
read -r -a mpi_flags <<<"$2"
train=$3
reader=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
expect() {  # expect FILE REGEX (extended, one line)
  grep -Eq -- "$2" "$1" || fail "$1 lacks a line matching: $2"
}
"$mpiexec" "${mpi_flags[@]}" -np 2 "$train" --model small-resnet --blocks_per_stage 1,1 --width 4 --image_size 16 \
  --synthetic_samples 64 --batch_per_rank 8 --epochs 2 --log_every_steps 2 --loader_threads 1 \
  --tensorboard-dir tb > run.log 2>&1
rc=$?
cat run.log
[ "$rc" = 0 ] || fail "the run exited $rc"
files=(tb/events.out.tfevents.*)
[ "${#files[@]}" = 1 ] && [ -s "${files[0]}" ] || fail "expected one event file in tb/, got: $(ls tb)"
"$reader" "${files[0]}" > events.txt || fail "the event file does not read back: $(cat events.txt)"
cat events.txt
expect events.txt "^file_version brain.Event:2$"
expect events.txt "^text 0 config text     # dtrain-train's effective config$"
for step in 2 4 6 8; do
  for tag in train/loss train/lr train/images_per_sec train/data_wait_fraction; do
    expect events.txt "^scalar $step $tag [-0-9.e+]+$"
  done
done
for step in 4 8; do
  for tag in validation/top1 validation/top5 validation/loss train/epoch_loss train/epoch_images_per_sec; do
    expect events.txt "^scalar $step $tag [-0-9.e+]+$"
  done
done
[ "$(grep -c '^scalar' events.txt)" = 26 ] || fail "expected 26 scalars (4 x 4 train, 2 x 5 per epoch)"
expect run.log "INFO  summary: config .*; TensorBoard events ${files[0]}$"
echo "PASS"
