#!/bin/bash
# Device call 3 (1 H200): accumulation_gpu_np2 failed in call 2 (1.05e-05 against the 1e-5 bound;
# 2.94e-07 in every earlier run). Two ranks sharing the GPU over the staged mpi-ring: CUDA graphs
# off / on x ring lanes 1 / 2, the default twice, and 1 rank, to find which change moved it.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
T=/tmp/dtrain-train-mpi-tests; xz -dc .device/s27/acc/dtrain-train-mpi-tests.xz > $T; chmod +x $T
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
F='--gtest_filter=GradientAccumulation.OnGpus*'
run() {  # run LABEL NP ENV...
  local label=$1 np=$2; shift 2
  local xs=(); for e in "$@"; do xs+=(-x "$e"); done
  env "$@" timeout 120 $MPI "${xs[@]}" -np $np $T "$F" > $OUT/$label.log 2>&1
  echo "$label rc $?: $(grep -h 'worst relative' $OUT/$label.log | head -1)"
}
run default_a 2 DTRAIN_CUDA_GRAPHS=1
run default_b 2 DTRAIN_CUDA_GRAPHS=1
run graphs0_lanes2 2 DTRAIN_CUDA_GRAPHS=0 DTRAIN_RING_LANES=2
run graphs1_lanes1 2 DTRAIN_CUDA_GRAPHS=1 DTRAIN_RING_LANES=1
run graphs0_lanes1 2 DTRAIN_CUDA_GRAPHS=0 DTRAIN_RING_LANES=1
run np1 1 DTRAIN_CUDA_GRAPHS=1
run np1_graphs0 1 DTRAIN_CUDA_GRAPHS=0
tar czf $OUT/logs.tgz -C $OUT $(cd $OUT && ls *.log) && rm -f $OUT/*.log
