#!/usr/bin/env bash
# On a lent GPU machine with build/bin carried there (see README): the GPU collective tests, then
# dtrain's nccl backend against raw NCCL (ncclAllReduce called directly) in the same run, plus the
# staged mpi-ring and hierarchical paths. Tables and JSON go to $OUT.
set -uo pipefail
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/out}
NP=${NP:-2}
mkdir -p "$OUT"
mpi=(mpirun --allow-run-as-root -np "$NP" -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
{
  nvidia-smi -L
  nvidia-smi topo -m
  build/bin/dtrain-core-gpu-tests --gtest_brief=1
  for np in 1 "$NP"; do mpirun --allow-run-as-root -np $np -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE build/bin/dtrain-comm-gpu-mpi-tests --gtest_brief=1; done
} 2>&1 | tee "$OUT/gpu_tests.log"
{
  for backend in raw-nccl nccl; do
    "${mpi[@]}" build/bin/dtrain-bench-allreduce -b 8 -e 1G -f 4 -w 5 -n 20 --backend $backend --json "$OUT/allreduce_${backend}_np${NP}.json"
  done
  "${mpi[@]}" build/bin/dtrain-bench-allreduce -b 1M -e 1G -f 8 -w 5 -n 20 -d bf16 --backend raw-nccl
  "${mpi[@]}" build/bin/dtrain-bench-allreduce -b 1M -e 1G -f 8 -w 5 -n 20 -d bf16 --backend nccl
  "${mpi[@]}" build/bin/dtrain-bench-allreduce -b 1M -e 256M -f 16 -w 2 -n 5 --backend mpi-ring
  "${mpi[@]}" -x DTRAIN_RANKS_PER_NODE=1 build/bin/dtrain-bench-allreduce -b 1M -e 256M -f 16 -w 2 -n 5 --backend hierarchical
} 2>&1 | tee "$OUT/gpu_allreduce.log"
