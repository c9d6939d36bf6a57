#!/bin/bash
# Preemption: a 2-rank dtrain-train signalled mid-epoch stops at a step boundary
# the ranks agree on, writes exactly one checkpoint, exits 75, and `--resume latest` then ends
# with parameters, momentum and BN state bit-identical to a run that was never interrupted, and
# reports the interrupted epoch's train loss over the whole epoch, as that run does (the
# checkpoint carries the epoch's running sums).
#   preemption_test.sh MPIEXEC "MPI FLAGS" DTRAIN_TRAIN SIGNAL WHOM
# WHOM: "one" signals one rank only (the ranks must still agree), "all" signals every rank.
set -u
mpiexec=$1
read -r -a mpi_flags <<<"$2"
train=$3
signal=$4
whom=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# ~25 ms steps on a 2-core VM: epoch 0 (128 steps) lasts seconds, so the signal lands mid-epoch.
flags=(--model small-resnet --blocks_per_stage 1,1 --width 8 --image_size 32 --synthetic_samples 2048
       --batch_per_rank 8 --epochs 2 --loader_threads 1 --max_validation_batches 2)
fail() { echo "FAIL: $*"; exit 1; }

# The tensors of a checkpoint: everything after "DTRAINC2", the 8-byte header length, the 4-byte
# header CRC and the header (train/proto/checkpoint.proto).
tensors() { local n; n=$(od -An -t u8 -j 8 -N 8 "$1" | tr -d ' '); tail -c +$((21 + n)) "$1"; }
newest() { ls -t "$1"/ckpt-*.dtrain | head -1; }

"$mpiexec" "${mpi_flags[@]}" -np 2 "$train" "${flags[@]}" --log_every_steps 0 --checkpoint_dir "$work/full" \
  > "$work/full.log" 2>&1 || { cat "$work/full.log"; fail "the uninterrupted run failed"; }

"$mpiexec" "${mpi_flags[@]}" -np 2 "$train" "${flags[@]}" --log_every_steps 1 --checkpoint_dir "$work/pre" > "$work/pre.log" 2>&1 &
launcher=$!
for _ in $(seq 600); do
  grep -q "epoch 0 step 5/128" "$work/pre.log" && break
  sleep 0.1
done
grep -q "epoch 0 step 5/128" "$work/pre.log" || { kill "$launcher"; cat "$work/pre.log"; fail "the run did not start"; }
ranks=$(pgrep -P "$launcher" -x dtrain-train)
[ "$(echo "$ranks" | wc -w)" = 2 ] || { kill "$launcher"; fail "expected 2 dtrain-train children of $launcher, got '$ranks'"; }
[ "$whom" = one ] && ranks=$(echo "$ranks" | tail -1)
echo "sending SIG$signal to $whom rank(s): $ranks"
kill -s "$signal" $ranks
wait "$launcher"
rc=$?
cat "$work/pre.log" | grep -v " epoch 0 step " 
[ "$rc" = 75 ] || fail "the signalled run exited $rc, expected 75"
grep -q "stopped by a stop signal .* at step [0-9]* (epoch 0, step [0-9]* of 128); checkpoint written" "$work/pre.log" \
  || fail "no 'stopped by a stop signal' line naming a step of epoch 0"
count=$(ls "$work/pre"/ckpt-*.dtrain | wc -l)
[ "$count" = 1 ] || fail "$count checkpoints written, expected 1: $(ls "$work/pre")"

"$mpiexec" "${mpi_flags[@]}" -np 2 "$train" "${flags[@]}" --log_every_steps 0 --checkpoint_dir "$work/pre" \
  --resume latest > "$work/resume.log" 2>&1 || { cat "$work/resume.log"; fail "the resumed run failed"; }
grep "resuming" "$work/resume.log"
cmp <(tensors "$(newest "$work/full")") <(tensors "$(newest "$work/pre")") \
  || fail "the resumed run's final tensors differ from the uninterrupted run's"
train_loss() { sed -n 's/.* epoch 0: train loss \([^,]*\),.*/\1/p' "$1"; }
echo "epoch 0 train loss: uninterrupted $(train_loss "$work/full.log"), resumed $(train_loss "$work/resume.log")"
[ -n "$(train_loss "$work/full.log")" ] && [ "$(train_loss "$work/full.log")" = "$(train_loss "$work/resume.log")" ] ||
  fail "the resumed epoch's train loss differs from the uninterrupted run's"
echo "PASS: stopped at a step boundary, one checkpoint, status 75, resumed to identical tensors and epoch loss"
