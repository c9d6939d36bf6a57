#!/usr/bin/env bash
# On a lent GPU machine with build/bin carried there
# (docs/building.md#running-on-a-gpu-host-built-elsewhere): the GPU collective tests, then dtrain's
# nccl backend against raw NCCL (ncclAllReduce called directly) in the same run, plus the staged
# mpi-ring and hierarchical paths. Every step has a time limit; logs and JSON go to $OUT.
#   PART=tests|bench|all (default all)
set -uo pipefail
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
OUT=${OUT:-/tmp/out}
NP=${NP:-2}
PART=${PART:-all}
mkdir -p "$OUT"
TESTS=build/bin/tests  # the test binaries; carried flat, they are in build/bin
[ -d "$TESTS" ] || TESTS=build/bin
mpi() { local np=$1 limit=$2; shift 2; timeout "$limit" stdbuf -oL mpirun --allow-run-as-root -np "$np" -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x NCCL_DEBUG "$@"; echo "[exit $?: $*]"; }
if [[ $PART != bench ]]; then
  {
    nvidia-smi -L
    timeout 60 $TESTS/dtrain-core-gpu-tests --gtest_brief=1
    mpi 1 90 $TESTS/dtrain-comm-gpu-mpi-tests
    mpi "$NP" 120 $TESTS/dtrain-comm-gpu-mpi-tests
  } 2>&1 | tee "$OUT/gpu_tests.log"
fi
if [[ $PART != tests ]]; then
  {
    for backend in raw-nccl nccl; do
      mpi "$NP" 120 build/bin/dtrain-bench-allreduce -b 8 -e 1G -f 4 -w 5 --iters 20 --backend $backend --metrics-file "$OUT/allreduce_${backend}_fp32_np${NP}.json"
    done
    for backend in raw-nccl nccl; do
      mpi "$NP" 60 build/bin/dtrain-bench-allreduce -b 1M -e 1G -f 8 -w 5 --iters 20 -d bf16 --backend $backend
    done
    mpi "$NP" 90 build/bin/dtrain-bench-allreduce -b 1M -e 256M -f 16 -w 2 --iters 5 --backend mpi-ring
    mpi "$NP" 90 -x DTRAIN_RANKS_PER_NODE=1 build/bin/dtrain-bench-allreduce -b 1M -e 256M -f 16 -w 2 --iters 5 --backend hierarchical
  } 2>&1 | tee "$OUT/gpu_allreduce.log"
fi
