#!/bin/bash
# dtrain-run --output-filename under mpirun: a 2-rank job writes each rank's stdout and stderr to
# DIR/1/rank.N/{stdout,stderr} (Open MPI's layout, as dtrain-run --help describes it).
#   output_filename_test.sh DTRAIN_RUN DIR
set -eu
run=$1
dir=$2
rm -rf "$dir"
"$run" -np 2 --mpi-args=--oversubscribe --output-filename "$dir/logs" -- \
  /bin/sh -c 'echo "out of rank $OMPI_COMM_WORLD_RANK"; echo "err of rank $OMPI_COMM_WORLD_RANK" >&2'
for rank in 0 1; do
  grep -qx "out of rank $rank" "$dir/logs/1/rank.$rank/stdout" || { echo "FAIL: $dir/logs/1/rank.$rank/stdout"; exit 1; }
  grep -qx "err of rank $rank" "$dir/logs/1/rank.$rank/stderr" || { echo "FAIL: $dir/logs/1/rank.$rank/stderr"; exit 1; }
done
echo "per-rank logs: $(cd "$dir" && find logs -type f | sort | tr '\n' ' ')"
