#!/bin/bash
# A resumed run does not read --init-weights again (a requeued job keeps its flags; the checkpoint's
# weights replace the file's anyway): with the file gone, --resume latest continues from the
# checkpoint, and without a checkpoint the same command still starts from the file. Synthetic data,
# one CPU rank, a few seconds.
#   init_weights_resume_test.sh MPIEXEC "MPI FLAGS" DTRAIN_TRAIN DTRAIN_EXPORT
set -u
mpiexec=$1
read -r -a mpi_flags <<<"$2"
train=$3
export_tool=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
run() {  # run LOG ARGS...: dtrain-train on one rank; its exit status
  local log=$1
  shift
  "$mpiexec" "${mpi_flags[@]}" -np 1 "$train" --model small-resnet --blocks-per-stage 1,1 --width 4 --image-size 16 \
    --synthetic-samples 64 --batch-per-rank 8 --log-every-steps 0 --loader-threads 1 --device cpu "$@" > "$log" 2>&1
}
run pretrain.log --epochs 1 --run-dir pretrained || { cat pretrain.log; fail "pretraining exited $?"; }
"$export_tool" pretrained/ckpt-*.dtrain --format safetensors w.safetensors > export.log 2>&1 ||
  { cat export.log; fail "dtrain-export exited $?"; }
flags=(--init-weights w.safetensors --checkpoint-dir ckpt --checkpoint-every-steps 4 --resume latest --epochs 2)
run first.log "${flags[@]}" --max-total-steps 4 || { cat first.log; fail "the first attempt exited $?"; }
grep -q "init_weights: " first.log || { cat first.log; fail "the first attempt did not start from the file"; }
rm w.safetensors
run requeued.log "${flags[@]}" || { cat requeued.log; fail "the resumed attempt exited $? without the weights file"; }
grep -q "init_weights: " requeued.log && { cat requeued.log; fail "the resumed attempt read the weights file"; }
grep -Eq "epoch 1: train loss" requeued.log || { cat requeued.log; fail "the resumed attempt did not finish epoch 1"; }
echo "PASS: the requeued run resumed from its checkpoint without reading --init-weights"
