#!/usr/bin/env bash
# Run on a lent GPU machine (docs/building.md#running-on-a-gpu-host-built-elsewhere) with build/bin
# carried there: dtrain-info tables and the GPU/MPI suites. Logs go to $OUT. The test binaries are
# in build/bin/tests (a build tree) or, carried flat, in build/bin.
set -uo pipefail
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
TESTS=build/bin/tests
[ -d "$TESTS" ] || TESTS=build/bin
run() { echo "\$ $*"; "$@"; echo "[exit $?]"; echo; }
{
  nvidia-smi -L
  ldd build/bin/dtrain-info | grep -E 'not found|mpi|nccl|cudnn|cublas'
  run mpirun --allow-run-as-root -np 2 build/bin/dtrain-info
  run env DTRAIN_RANKS_PER_NODE=1 mpirun --allow-run-as-root -np 2 build/bin/dtrain-info
  run mpirun --allow-run-as-root --oversubscribe -np 4 build/bin/dtrain-info
  run mpirun --allow-run-as-root --oversubscribe -np 4 build/bin/dtrain-info --allow-gpu-sharing
  run env CUDA_VISIBLE_DEVICES=1 mpirun --allow-run-as-root -np 1 -x CUDA_VISIBLE_DEVICES build/bin/dtrain-info
  run $TESTS/dtrain-core-gpu-tests
  run mpirun --allow-run-as-root -np 2 $TESTS/dtrain-core-mpi-tests
  run $TESTS/dtrain-core-tests --gtest_brief=1
} 2>&1 | tee "$OUT/foundation_device_check.log"
