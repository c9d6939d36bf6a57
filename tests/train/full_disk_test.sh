#!/bin/bash
# A disk that fills at a periodic checkpoint, on a tmpfs of its own (one checkpoint of the model
# below is 294 KB):
#  - room for 1.5 checkpoints: the one at step 4 fails with a warning naming the file and the
#    error, training goes on past it, the last good checkpoint (step 2) stays whole, and only the
#    final checkpoint, which must be written, ends the run (status 1, naming the file); the resume
#    goes on from step 2 and no .tmp is left;
#  - room for 2.5 checkpoints, keep_checkpoints 2: rotation removes the oldest before each write the
#    disk could not hold, so every checkpoint is written and the run ends with status 0;
#  - the metrics file, TensorBoard events and the timeline on a disk already full (checkpoints
#    elsewhere): each warns naming its file, and the run trains to its end, status 0, with its final
#    checkpoint.
# Needs a mount namespace (unshare -m as root, or unshare -rm); skips (77) without one.
#   full_disk_test.sh MPIEXEC "MPI FLAGS" DTRAIN_TRAIN
set -u
if [ -z "${DTRAIN_TEST_FULL_DISK_INSIDE:-}" ]; then
  for how in "-m" "-rm"; do
    if unshare $how true 2>/dev/null; then
      DTRAIN_TEST_FULL_DISK_INSIDE=1 exec unshare $how "$0" "$@"
    fi
  done
  echo "SKIP: no mount namespace here (unshare -m and unshare -rm both fail), so no small tmpfs to fill"
  exit 77
fi
mpiexec=$1
read -r -a mpi_flags <<<"$2"
train=$3
work=$(mktemp -d)
trap 'umount "$work/disk" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
flags=(--model small-resnet --blocks_per_stage 1,1 --width 4 --image_size 16 --batch_per_rank 8 --epochs 1
       --synthetic_samples 256 --log_every_steps 1 --checkpoint_every_steps 2)
disk() {
  mkdir -p "$work/disk"
  umount "$work/disk" 2>/dev/null
  mount -t tmpfs -o "size=$1" tmpfs "$work/disk" || { echo "SKIP: cannot mount a tmpfs of $1"; exit 77; }
}

disk 440k
"$mpiexec" "${mpi_flags[@]}" -np 2 "$train" "${flags[@]}" --checkpoint_dir "$work/disk/ck" > "$work/a.log" 2>&1
rc=$?
grep -E "checkpoint|CHECKPOINT|ERROR|step (4|5|16)/16" "$work/a.log" | cut -c1-400
ls -l "$work/disk/ck"
[ "$rc" = 1 ] || fail "exit status $rc, expected 1 (the final checkpoint cannot be written)"
grep -q "WARN  CHECKPOINT NOT WRITTEN at step 4: .*$work/disk/ck/ckpt-4-[0-9a-f]*\.dtrain.*No space left on device.*the last good checkpoint is $work/disk/ck/ckpt-2-" "$work/a.log" ||
  fail "no warning naming the step-4 checkpoint, the error and the last good checkpoint"
grep -q "epoch 0 step 5/16" "$work/a.log" || fail "training did not go on after the failed checkpoint"
grep -q "ERROR .*ckpt-16-[0-9a-f]*\.dtrain.*No space left on device" "$work/a.log" ||
  fail "the final checkpoint's failure does not name the file and the error"
! ls "$work/disk/ck" | grep -q '\.tmp$' || fail "a .tmp file was left: $(ls "$work/disk/ck")"
"$mpiexec" "${mpi_flags[@]}" -np 2 "$train" "${flags[@]}" --checkpoint_dir "$work/disk/ck" --resume latest \
  --max_total_steps 3 --checkpoint_every_steps 0 > "$work/resume.log" 2>&1
grep "resuming" "$work/resume.log"
grep -q "resuming run [0-9a-f]* from $work/disk/ck/ckpt-2-" "$work/resume.log" ||
  { cat "$work/resume.log"; fail "the resume did not go on from the step-2 checkpoint"; }

disk 740k
"$mpiexec" "${mpi_flags[@]}" -np 2 "$train" "${flags[@]}" --checkpoint_dir "$work/disk/ck" --keep_checkpoints 2 \
  > "$work/b.log" 2>&1 || { cat "$work/b.log"; fail "the run with keep_checkpoints 2 failed"; }
grep -E "checkpoint|making room" "$work/b.log" | cut -c1-300
grep -q "WARN  making room for the next checkpoint .*removed the older $work/disk/ck/ckpt-2-" "$work/b.log" ||
  fail "rotation did not make room before writing"
! grep -q "CHECKPOINT NOT WRITTEN" "$work/b.log" || fail "a checkpoint failed although rotation could make room"
[ "$(ls "$work/disk/ck" | grep -c '^ckpt-.*\.dtrain$')" = 2 ] || fail "expected 2 checkpoints: $(ls "$work/disk/ck")"
disk 64k
dd if=/dev/zero of="$work/disk/filler" bs=4k 2>/dev/null  # until the disk is full
"$mpiexec" "${mpi_flags[@]}" -np 2 "$train" "${flags[@]}" --checkpoint_dir "$work/ck" \
  --metrics_file "$work/disk/m.jsonl" --tensorboard_dir "$work/disk/tb" --timeline "$work/disk/t.json" \
  --timeline_steps 2:3 > "$work/c.log" 2>&1 || { cat "$work/c.log"; fail "a full disk for the side outputs failed the run"; }
grep -E "WARN .*(metrics|tensorboard|timeline)" "$work/c.log" | cut -c1-300
for what in "metrics file $work/disk/m.jsonl: cannot write" "tensorboard: cannot write $work/disk/tb/" \
            "timeline: not written: .*$work/disk/t.json"; do
  grep -Eq "WARN  $what" "$work/c.log" || fail "no warning '$what'"
done
ls "$work"/ck/ckpt-16-*.dtrain > /dev/null || fail "no final checkpoint after the side outputs failed"
echo "PASS: a full disk at a periodic checkpoint is a warning, the last good checkpoint stays, rotation makes room,"
echo "      and side outputs on a full disk warn while the run trains on"
