#!/usr/bin/env bash
# Multi-node speed on one 4-GPU machine (nvidia-h100-x4), every row in one warm machine: simulated
# nodes of DTRAIN_RANKS_PER_NODE ranks (2 x 2 and 4 x 1), device buffers staged through pinned host
# memory across nodes (DTRAIN_MPI_DEVICE_POINTERS=stage), every run under a time limit
# (timed_step.sh: a hang costs its limit, not the call), one JSON per run, and after every part the
# table of bench/summarize_xnode.py over all of $XNODE_DIR (images/s per GPU, % of 1 GPU, the
# ceiling the measured link sets, the ratio to the peer on the same layout). Parts, each within one
# 10-minute call (times estimated from earlier runs of the same tools), in any order: the summary
# after the last one has every row.
#   train   dtrain-bench-train ResNet-50 bf16 b256: 1 GPU; 4 GPUs nccl; 2x2 hierarchical with the
#           default, fp32 and bf16 wire; 4x1 hierarchical bf16; 4x1 staged mpi-ring fp32, bf16 (~4 min)
#   link    64 MiB all-reduce on 4x1, three interleaved rounds of host mpi-ring, host MPI_Allreduce
#           and device-buffer staged mpi-ring (the staging's cost), NCCL on sockets once; then the
#           peer on 1 GPU (~3 min)
#   peer    PyTorch DDP + torch.compile (bench/peers/pytorch_resnet50.py, bf16 b256), NCCL told of
#           the simulated nodes (NCCL_HOSTID per node): 2x2 and 4x1 on sockets only (P2P and SHM
#           off), and 2x2 with NVLink inside a node, sockets across (~8 min)
#   e2e     dtrain-train, synthetic and from JPEG files (bench/make_jpeg_tree.sh with 552 images per
#           class, 55,200 in all: 54 steps an epoch on 4 ranks; made once in $JPEG_DIR), on 1 GPU and
#           2x2 hierarchical; the files on 4 GPUs nccl (~6 min)
#   fmnist  Fashion-MNIST, the shipped config, 15 epochs, global batch 64 as the CPU reference:
#           2x2 with the default backend and wire against 4 GPUs nccl (~3 min)
#   summary the table alone
# From the repository root; binaries in $BIN (dtrain-bench-train, dtrain-bench-allreduce,
# dtrain-train, and tests/dtrain-make-image-tree or dtrain-make-image-tree for e2e). Results
# gather in $XNODE_DIR, which outlives a call on a warm machine, so that each part's summary has the
# earlier parts' rows; $OUT, when set, gets xnode.tgz (every JSON and log) and summary.txt.
#   BIN=build/bin OUT=/tmp/out bench/run_gpu_xnode.sh PART...
#   DRY_RUN=1 bench/run_gpu_xnode.sh PART...     prints each run's command, runs nothing
set -uo pipefail
BIN=${BIN:-build/bin}
BACK=${OUT:-}
OUT=${XNODE_DIR:-/tmp/dtrain_xnode}  # timed_step.sh writes its logs and steps.txt to $OUT
DRY_RUN=${DRY_RUN:-0}
JPEG_DIR=${JPEG_DIR:-/tmp/dtrain_jpeg_tree_552}
PY=${PY:-/opt/torch/.venv/bin/python}
SUMMARY_PY=$(command -v python3 || echo "$PY")
PARTS=("$@")
usage="usage: bench/run_gpu_xnode.sh PART... (train, link, peer, e2e, fmnist, summary, all)"
((${#PARTS[@]})) || { echo "$usage" >&2; exit 2; }
for p in "${PARTS[@]}"; do
  case $p in
    train | link | peer | e2e | fmnist | summary | all) ;;
    *) echo "run_gpu_xnode.sh: unknown part '$p'; $usage" >&2; exit 2 ;;
  esac
done
wants() { [[ " ${PARTS[*]} " == *" $1 "* || " ${PARTS[*]} " == *" all "* ]]; }

mkdir -p "$OUT/cache"
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 DTRAIN_MPI_DEVICE_POINTERS=stage
# Convolution plans and the peer's compiled kernels are measured once per machine, not per run.
export DTRAIN_PLAN_CACHE=$OUT/cache/plans TORCHINDUCTOR_CACHE_DIR=$OUT/cache/inductor
# --bind-to none: dtrain-train's loader threads need more than the one core mpirun would give a rank.
MPI=(mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_MPI_DEVICE_POINTERS
     -x DTRAIN_PLAN_CACHE -x TORCHINDUCTOR_CACHE_DIR)
source "$(dirname "$0")/timed_step.sh"  # step NAME LIMIT_S COMMAND...
if [[ $DRY_RUN == 1 ]]; then
  step() { printf "%s (limit %s s):" "$1" "$2"; shift 2; printf " %q" "$@"; echo; }
elif [[ ${PARTS[*]} != summary ]]; then
  GPUS=$(nvidia-smi -L 2> /dev/null | wc -l)
  if [[ $GPUS -lt 4 ]]; then
    echo "run_gpu_xnode.sh: needs 4 GPUs (one per rank), found $GPUS" >&2
    exit 2
  fi
  { nvidia-smi -L; echo "nproc $(nproc)"; git rev-parse --short HEAD 2> /dev/null; } > "$OUT/machine.txt"
fi
layout() {  # layout RPN: mpirun's flag for simulated nodes of RPN ranks ("-" for none)
  [[ $1 == - ]] || echo "-x DTRAIN_RANKS_PER_NODE=$1"
}

bench_train() {  # bench_train NAME NP RPN ARGS...
  local name=$1 np=$2 rpn=$3
  shift 3
  # shellcheck disable=SC2046
  step "train_$name" 150 "${MPI[@]}" -np "$np" $(layout "$rpn") "$BIN/dtrain-bench-train" --precision bf16 \
    --batch-per-rank 256 --timing-warmup-steps 10 --steps 30 --world-sizes "$np" \
    --metrics-file "$OUT/train_$name.json" "$@"
}
if wants train; then
  bench_train 1gpu 1 -
  bench_train 4gpu_nccl 4 - --backend nccl
  bench_train 2x2_hier_default 4 2 --backend hierarchical
  bench_train 2x2_hier_fp32 4 2 --backend hierarchical --gradient-wire-dtype fp32
  bench_train 2x2_hier_bf16 4 2 --backend hierarchical --gradient-wire-dtype bf16
  bench_train 4x1_hier_bf16 4 1 --backend hierarchical --gradient-wire-dtype bf16
  bench_train 4x1_ring_fp32 4 1 --backend mpi-ring --gradient-wire-dtype fp32
  bench_train 4x1_ring_bf16 4 1 --backend mpi-ring --gradient-wire-dtype bf16
fi

allreduce() {  # allreduce NAME ARGS...: 64 MiB fp32 sum on 4 ranks as 4 simulated nodes
  local name=$1
  shift
  step "link_$name" 90 "${MPI[@]}" -np 4 -x DTRAIN_RANKS_PER_NODE=1 "$@" -b 64M -e 64M -w 5 --iters 20 \
    --metrics-file "$OUT/link_$name.json"
}
# PyTorch reads its ranks from torchrun's variables; under mpirun this sets them, and NCCL_HOSTID
# per simulated node of XNODE_RPN ranks, so that NCCL sees those nodes as hosts of their own.
PEER_SHIM='export RANK=$OMPI_COMM_WORLD_RANK WORLD_SIZE=$OMPI_COMM_WORLD_SIZE LOCAL_RANK=$OMPI_COMM_WORLD_LOCAL_RANK
export NCCL_HOSTID=xnode$((OMPI_COMM_WORLD_RANK / XNODE_RPN)); exec "$@"'
PEER_ARGS=(bench/peers/pytorch_resnet50.py --precision bf16 --batch-per-rank 256 --mode compile --timing-warmup-steps 15
           --steps 30)
peer() {  # peer NAME RPN [VAR=VALUE...]: DDP + torch.compile on 4 GPUs as nodes of RPN ranks
  local name=$1 rpn=$2
  shift 2
  local env=()
  for v in "$@"; do env+=(-x "$v"); done
  step "peer_$name" 300 "${MPI[@]}" -np 4 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$((29600 + RANDOM % 300)) \
    -x XNODE_RPN="$rpn" -x NCCL_IB_DISABLE=1 "${env[@]}" bash -c "$PEER_SHIM" peer "$PY" "${PEER_ARGS[@]}" \
    --metrics-file "$OUT/peer_$name.json"
}
if wants link; then
  for round in 1 2 3; do
    allreduce "host_ring_r$round" -x CUDA_VISIBLE_DEVICES= "$BIN/dtrain-bench-allreduce" --backend mpi-ring
    allreduce "host_mpi_r$round" -x CUDA_VISIBLE_DEVICES= "$BIN/dtrain-bench-allreduce" --backend raw-mpi
    allreduce "device_ring_r$round" "$BIN/dtrain-bench-allreduce" --backend mpi-ring
  done
  allreduce nccl_sockets -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 -x NCCL_IB_DISABLE=1 \
    "$BIN/dtrain-bench-allreduce" --backend nccl
  step peer_1gpu 300 "$PY" "${PEER_ARGS[@]}" --metrics-file "$OUT/peer_1gpu.json"
fi
if wants peer; then
  peer 2x2_sockets 2 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
  peer 4x1_sockets 1 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
  peer 2x2_nvlink_inside 2
fi

dtrain_train() {  # dtrain_train NAME NP RPN ARGS...: dtrain-train, one validation record per epoch; a fresh run dir
  [[ $DRY_RUN == 1 ]] || rm -rf "$OUT/runs/$1" "$OUT/$1.jsonl"
  local name=$1 np=$2 rpn=$3
  shift 3
  # shellcheck disable=SC2046
  step "$name" 300 "${MPI[@]}" -np "$np" $(layout "$rpn") "$BIN/dtrain-train" --device gpu \
    --metrics_file "$OUT/$name.jsonl" --run-dir "$OUT/runs/$name" "$@"
}
if wants e2e; then
  RN50=(--batch_per_rank 256 --log_every_steps 25 --timing_warmup_steps 5 --max_validation_batches 4)
  SYN=("${RN50[@]}" --dataset synthetic --epochs 1)
  # Three epochs from files: the first reads files the page cache may not hold yet.
  JPEG=("${RN50[@]}" --dataset imagenet --data_dir "$JPEG_DIR" --loader_threads 14 --epochs 3)
  [[ -d $JPEG_DIR ]] || step make_jpeg_tree 300 env BIN="$BIN" TRAIN_PER_CLASS=552 bench/make_jpeg_tree.sh "$JPEG_DIR"
  [[ $DRY_RUN == 1 ]] || find "$JPEG_DIR" -type f -print0 | xargs -0 cat > /dev/null  # page cache for every run
  dtrain_train e2e_synthetic_1gpu 1 - "${SYN[@]}" --synthetic_samples 20480
  dtrain_train e2e_synthetic_2x2 4 2 "${SYN[@]}" --synthetic_samples 81920 --backend hierarchical
  dtrain_train e2e_jpeg_1gpu 1 - "${JPEG[@]}"
  dtrain_train e2e_jpeg_2x2 4 2 "${JPEG[@]}" --backend hierarchical
  dtrain_train e2e_jpeg_4gpu_nccl 4 - "${JPEG[@]}" --backend nccl
fi

if wants fmnist; then
  FMNIST=${FMNIST:-/usr/share/datasets/fashion-mnist}
  [[ -d $FMNIST ]] || FMNIST=.carry/fmnist
  # The CPU reference (93.12% after 15 epochs) ran 2 ranks x 32: global batch 64, here 4 x 16.
  FM=(--config configs/fashion_mnist_resnet.pbtxt --data_dir "$FMNIST" --epochs 15 --batch_per_rank 16
      --log_every_steps 0)
  dtrain_train fmnist_2x2 4 2 "${FM[@]}"
  dtrain_train fmnist_4gpu_nccl 4 - "${FM[@]}" --backend nccl
fi

if [[ $DRY_RUN != 1 ]]; then
  "$SUMMARY_PY" "$(dirname "$0")/summarize_xnode.py" "$OUT" > "$OUT/summary.txt"
  cat "$OUT/summary.txt"
  if [[ -n $BACK && $BACK != "$OUT" ]]; then
    mkdir -p "$BACK"
    cp "$OUT/summary.txt" "$BACK/"
    tar czf "$BACK/xnode.tgz" -C "$OUT" --exclude=./cache --exclude=./runs .  # runs/: final weights
  fi
fi
