#!/bin/bash
# Nothing trained is lost by default: a 2-rank run without --checkpoint-dir, in a fresh
# working directory, leaves runs/dtrain-<time>/ with config.pbtxt and its final weights, logs the
# config's summary, progress lines with images/s per rank and the epoch's ETA, and a closing
# summary. The two files then start a run again: --config reads config.pbtxt, --resume the weights.
#   run_dir_test.sh MPIEXEC "MPI FLAGS" DTRAIN_TRAIN
set -u
mpiexec=$1
read -r -a mpi_flags <<<"$2"
train=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
expect() {  # expect LOG REGEX (extended, one line)
  grep -Eq -- "$2" "$1" || fail "$1 lacks a line matching: $2"
}
flags=(--model small-resnet --blocks_per_stage 1,1 --width 4 --image_size 16 --synthetic_samples 64
       --batch_per_rank 8 --epochs 2 --log_every_steps 2 --loader_threads 1)

"$mpiexec" "${mpi_flags[@]}" -np 2 "$train" "${flags[@]}" > first.log 2>&1
rc=$?
cat first.log
[ "$rc" = 0 ] || fail "the run exited $rc"
dirs=(runs/dtrain-*)
[ "${#dirs[@]}" = 1 ] && [ -d "${dirs[0]}" ] || fail "expected one runs/dtrain-* directory, got: $(ls -R runs)"
dir=${dirs[0]}
[[ $dir =~ ^runs/dtrain-[0-9]{8}T[0-9]{6}Z$ ]] || fail "run directory '$dir' is not runs/dtrain-<UTC time>"
[ -s "$dir/config.pbtxt" ] || fail "no $dir/config.pbtxt"
ckpts=("$dir"/ckpt-*.dtrain)
[ "${#ckpts[@]}" = 1 ] && [ -s "${ckpts[0]}" ] || fail "expected one final checkpoint in $dir: $(ls "$dir")"
ckpt=${ckpts[0]}
grep -q '^model: "small-resnet"$' "$dir/config.pbtxt" || fail "config.pbtxt lacks the model"
grep -q '^depth:' "$dir/config.pbtxt" && fail "config.pbtxt holds depth, which small-resnet does not use"
expect first.log "INFO  config: small-resnet \(blocks \[1, 1\], width 4.*; every field in $dir/config.pbtxt$"
expect first.log "epoch 1 step 2/4 loss [0-9.]+ lr [0-9.e-]+, [0-9]+ images/s \([0-9]+ per rank\), data wait [0-9.]+%, epoch ETA [0-9.]+s \(global step 6\)$"
expect first.log "INFO  final weights $ckpt \(step 8\)$"
expect first.log "INFO  summary: finished 8 step\(s\) in [0-9.]+s \([0-9.]+s of them training\), [0-9.]+ images/s in total, [0-9.]+ per rank \(2 rank\(s\)\)$"
expect first.log "INFO  summary: validation top-1 [0-9.]+% final \(epoch 1\), [0-9.]+% best \(epoch [01]\); top-5 [0-9.]+% final, [0-9.]+% best$"
expect first.log "INFO  summary: config $dir/config.pbtxt; final weights $ckpt; checkpoints none \(no --checkpoint-dir\); metrics none \(no --metrics-file\)$"

# The run directory's two files are enough to go on: the config as written, the weights resumed.
"$mpiexec" "${mpi_flags[@]}" -np 2 "$train" --config "$dir/config.pbtxt" --resume "$ckpt" > second.log 2>&1
rc=$?
cat second.log
[ "$rc" = 0 ] || fail "the run from $dir/config.pbtxt and $ckpt exited $rc"
expect second.log "resuming run [0-9a-f]+ from $ckpt at epoch 2, step 0 of the epoch, step 8 in total"
expect second.log "summary: finished 0 step\(s\)"
ls -d runs/config-* > /dev/null 2>&1 || fail "the second run (--config .../config.pbtxt) has no runs/config-* directory"
echo "PASS: runs/dtrain-<time>/ holds config.pbtxt and the final weights, and they start a run again"
