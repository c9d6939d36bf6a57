#!/usr/bin/env bash
# On a lent GPU machine: the staged device paths (mpi-ring, hierarchical) after a change to
# staging, plus a quick staged all-reduce timing. Every test is listed as it starts, so a hang shows
# where it stopped. Logs to $OUT.
set -uo pipefail
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/out}
TESTS=build/bin/tests  # the test binaries; carried flat, they are in build/bin
[ -d "$TESTS" ] || TESTS=build/bin
m() { local np=$1 limit=$2; shift 2; timeout "$limit" mpirun --allow-run-as-root -np "$np" -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE "$@"; echo "[exit $? after ${SECONDS}s]"; }
{
  m 1 120 $TESTS/dtrain-comm-gpu-mpi-tests --gtest_filter="${FILTER:-*mpi_ring*:*hierarchical*}" --gtest_color=no
  m 2 240 $TESTS/dtrain-comm-gpu-mpi-tests --gtest_filter="${FILTER:-*mpi_ring*:*hierarchical*}" --gtest_color=no
  m 2 60 build/bin/dtrain-bench-allreduce -b 64M -e 256M -f 4 -w 2 --iters 5 --backend mpi-ring
} 2>&1 | tee "$OUT/staging_check.log"
