#!/usr/bin/env bash
# Kills one rank of a running 2-rank dtrain-train with SIGKILL and checks that the whole job ends
# within 60 s, with a non-zero status, and that the output names the lost rank.
#   killed_rank_test.sh MPIEXEC "MPI FLAGS" DTRAIN_TRAIN
set -uo pipefail
mpiexec=$1
read -r -a mpi_flags <<< "$2"
train=$3
log=$(mktemp)
trap 'rm -f "$log"' EXIT

"$mpiexec" "${mpi_flags[@]}" -np 2 "$train" --model small-resnet --blocks_per_stage 1 --width 4 --image_size 16 \
  --synthetic_samples 100000 --batch_per_rank 8 --epochs 100 --log-every-steps 10 > "$log" 2>&1 &
launcher=$!

# Wait for training to be under way, then find rank 1 among the launcher's children.
for _ in $(seq 1 120); do
  grep -q ' step ' "$log" && break
  sleep 0.5
done
victim=""
for pid in $(pgrep -P "$launcher"); do
  if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then victim=$pid; fi
done
if [[ -z $victim ]]; then
  echo "could not find rank 1 (training never started?)"; cat "$log"; kill -9 "$launcher" 2>/dev/null; exit 1
fi

start=$(date +%s)
kill -9 "$victim"
# Give the job 60 s to end by itself.
for _ in $(seq 1 120); do
  kill -0 "$launcher" 2>/dev/null || break
  sleep 0.5
done
if kill -0 "$launcher" 2>/dev/null; then
  echo "FAIL: the job still runs 60 s after rank 1 was killed"; kill -9 "$launcher"; cat "$log"; exit 1
fi
wait "$launcher"
status=$?
elapsed=$(( $(date +%s) - start ))
echo "job ended ${elapsed} s after SIGKILL of rank 1 (pid $victim), exit status $status"
if [[ $status -eq 0 ]]; then echo "FAIL: exit status 0"; cat "$log"; exit 1; fi
if ! grep -Eq 'rank 1\b' "$log"; then echo "FAIL: the output does not name rank 1"; cat "$log"; exit 1; fi
grep -E 'rank 1\b' "$log" | head -3
