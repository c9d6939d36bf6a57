#!/usr/bin/env bash
# dtrain.torch against PyTorch DDP on a 4-GPU machine, torchvision ResNet-50 bf16 channels_last b256,
# the same script (bench/torch/train_resnet.py) for every peer, every run under a time limit:
#   single: dtrain on 1 GPU (the scaling baseline), DDP eager and compiled on 1 GPU;
#   multi:  4 GPUs: dtrain, dtrain around torch.compile, DDP eager, DDP + torch.compile;
#   nodes:  2 simulated nodes x 2 GPUs: dtrain with DTRAIN_RANKS_PER_NODE=2 against DDP with NCCL
#           on its socket transport only (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1), eager and compiled.
# Run from the repository root on the GPU machine; libdtrain.so.1 of a CUDA build in $DTRAIN_LIBRARY
# (default build/lib/libdtrain.so.1); results and logs in $OUT (summary.txt, one JSON per run).
#   OUT=/tmp/torch_bench bench/torch/run_gpu.sh [single|multi|nodes|all|core]
# TRAIN_ARGS adds flags to every run (for example "--steps 40 --warmup 15" to fit a time limit).
set -uo pipefail
PART=${1:-all}
OUT=${OUT:-/tmp/dtrain_torch_bench}
PY=${PY:-/opt/torch/.venv/bin/python}
export DTRAIN_LIBRARY=${DTRAIN_LIBRARY:-$PWD/build/lib/libdtrain.so.1}
export PYTHONPATH=$PWD/python PYTHONDONTWRITEBYTECODE=1
SP=$($PY -c "import site; print(site.getsitepackages()[0])")
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
mkdir -p "$OUT"
MPI=(mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_LIBRARY -x PYTHONPATH
     -x PYTHONDONTWRITEBYTECODE)
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
git rev-parse --short HEAD > "$OUT/commit.txt" 2>/dev/null

run() {  # run NAME NP [ENV=V...] -- MODE: one benchmark, 500 s at most
  local name=$1 np=$2
  shift 2
  local env=()
  while [[ $1 != -- ]]; do env+=(-x "$1"); shift; done  # mpirun -x NAME=VALUE: set on every rank
  shift
  timeout -k 10 500 "${MPI[@]}" "${env[@]}" -np "$np" $PY bench/torch/train_resnet.py --mode "$1" \
    --json "$OUT/$name.json" ${TRAIN_ARGS:-} > "$OUT/$name.log" 2>&1
  local rc=$?
  local line
  line=$(grep -h "images/s per GPU" "$OUT/$name.log" | tail -1)
  printf "%-28s %s\n" "$name" "${line:-FAILED (rc $rc, see $name.log)}" | tee -a "$OUT/summary.txt"
}

if [[ $PART == core ]]; then  # one 10-minute call: the scaling baseline and the 4-GPU peers, no compile
  run dtrain_1gpu 1 -- dtrain
  run dtrain_4gpu 4 -- dtrain
  run ddp_4gpu 4 -- ddp
fi
if [[ $PART == single || $PART == all ]]; then
  run dtrain_1gpu 1 -- dtrain
  run ddp_1gpu 1 -- ddp
  run ddp_compile_1gpu 1 -- ddp-compile
fi
if [[ $PART == multi || $PART == all ]]; then
  run dtrain_4gpu 4 -- dtrain
  run ddp_4gpu 4 -- ddp
  run ddp_compile_4gpu 4 -- ddp-compile
  run dtrain_compile_4gpu 4 -- dtrain-compile
fi
if [[ $PART == nodes || $PART == all ]]; then
  run dtrain_2x2_nodes 4 DTRAIN_RANKS_PER_NODE=2 -- dtrain
  run ddp_2x2_sockets 4 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 -- ddp
  run ddp_compile_2x2_sockets 4 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 -- ddp-compile
fi
echo "summary: $OUT/summary.txt"
