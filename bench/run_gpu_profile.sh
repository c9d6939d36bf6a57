#!/usr/bin/env bash
# What dtrain-project (bench/project/) needs from a GPU machine, in one or two device calls on
# nvidia-h100-x4 (4 H100 of one host):
#   profiles: step profiles of ResNet-50 bf16 on 1 GPU at batch 400, 256, 128, 64, 50, 32, 16
#             (dtrain-bench-train --profile-out; 400/50/16 are MLPerf v4.0's batches per GPU at 8,
#             64 and 2,528 GPUs), each with its own measured images/s, and dtrain-train's own
#             profile at 256 (dtrain_train_profile_b256.json, not read by the check);
#   curves:   all-reduce curves to fit the tiers: nccl on 2 and 4 GPUs (intra), the staged host
#             path between simulated nodes (DTRAIN_RANKS_PER_NODE=1: mpi-ring on 2 and 4 "nodes",
#             hierarchical on 2 x 2) (inter_host);
#   train:    the configurations to check, measured in this call: b256 on 1, 2, 4 GPUs with nccl,
#             2 simulated nodes x 2 GPUs hierarchical and 4 x 1 mpi-ring, each with fp32 and bf16 wire;
#   then machine.json (the fitted tiers), points.json (the measured configurations) and
#   check.txt (dtrain-project's predictions against them) where /usr/bin/python3 is there.
# Every step has a time limit; logs and JSON go to $OUT. profiles about 5 min, curves about 3,
# train about 4.
# PROFILE_BATCHES="400 256 50 16" profiles only the batches the MLPerf check and b256 need (~3.5 min).
#   BIN=build/bin OUT=/tmp/out bench/run_gpu_profile.sh [profiles|curves|train|check|all]
# Then, anywhere (bench/project/README.md): bench/run_projection_check.sh $OUT
set -uo pipefail
BIN=${BIN:-build/bin}
OUT=${OUT:-/tmp/dtrain_profile}
PART=${1:-all}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
MPI=(mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x NCCL_DEBUG)
# Simulated nodes: R ranks per "node", the staged host path between them (as run_gpu_multinode.sh).
SIM=(-x DTRAIN_MPI_DEVICE_POINTERS=stage)
STEPS=$OUT/steps.txt
touch "$STEPS"

source "$(dirname "$0")/timed_step.sh"  # step NAME LIMIT_S COMMAND...

nvidia-smi -L > "$OUT/gpus.txt" 2>&1
TRAIN=(--precision bf16 --timing-warmup-steps 20 --steps 30)
if [[ $PART == profiles || $PART == all ]]; then
  for b in ${PROFILE_BATCHES:-400 256 128 64 50 32 16}; do
    step "profile_b$b" 240 "${MPI[@]}" -np 1 "$BIN/dtrain-bench-train" "${TRAIN[@]}" --batch-per-rank "$b" \
      --world-sizes 1 --profile-out "$OUT/profile_b$b.json" --profile-steps 10 --metrics-file "$OUT/profile_b$b.train.json"
  done
  # The same profile from the path users run (its engine's events), to compare with profile_b256.json.
  step dtrain_train_profile_b256 300 "${MPI[@]}" -np 1 "$BIN/dtrain-train" --device gpu --precision bf16 \
    --dataset synthetic --synthetic_samples 12800 --batch_per_rank 256 --epochs 1 --max-total-steps 45 \
    --log_every_steps 25 --timing_warmup_steps 10 --max_validation_batches 1 --loader_threads 14 \
    --run-dir /tmp/dtrain_train_profile_run --profile-out "$OUT/dtrain_train_profile_b256.json" --profile-steps 21:40
fi
if [[ $PART == curves || $PART == all ]]; then
  A=(-b 1K -e 1G -f 4 -w 5 --iters 20)
  for np in 2 4; do
    step "allreduce_nccl_np$np" 150 "${MPI[@]}" -np $np "$BIN/dtrain-bench-allreduce" "${A[@]}" --backend nccl \
      --metrics-file "$OUT/allreduce_nccl_np$np.json"
  done
  H=(-b 64K -e 256M -f 4 -w 3 --iters 10)
  for np in 2 4; do
    step "allreduce_mpi-ring_sim${np}x1" 180 "${MPI[@]}" -np $np "${SIM[@]}" -x DTRAIN_RANKS_PER_NODE=1 \
      "$BIN/dtrain-bench-allreduce" "${H[@]}" --backend mpi-ring --metrics-file "$OUT/allreduce_mpi-ring_sim${np}x1.json"
  done
  step allreduce_hierarchical_sim2x2 180 "${MPI[@]}" -np 4 "${SIM[@]}" -x DTRAIN_RANKS_PER_NODE=2 \
    "$BIN/dtrain-bench-allreduce" "${H[@]}" --backend hierarchical --metrics-file "$OUT/allreduce_hierarchical_sim2x2.json"
fi
if [[ $PART == train || $PART == all ]]; then
  B=("${TRAIN[@]}" --batch-per-rank 256)
  step train_nccl 200 "${MPI[@]}" -np 4 "$BIN/dtrain-bench-train" "${B[@]}" --backend nccl --world-sizes 1,2,4 \
    --metrics-file "$OUT/train_nccl.json"
  for wire in fp32 bf16; do
    step "train_hierarchical_sim2x2_$wire" 200 "${MPI[@]}" -np 4 "${SIM[@]}" -x DTRAIN_RANKS_PER_NODE=2 \
      "$BIN/dtrain-bench-train" "${B[@]}" --backend hierarchical --gradient-wire-dtype "$wire" --world-sizes 4 \
      --metrics-file "$OUT/train_hierarchical_sim2x2_$wire.json"
  done
  for wire in fp32 bf16; do
    step "train_mpi-ring_sim4x1_$wire" 200 "${MPI[@]}" -np 4 "${SIM[@]}" -x DTRAIN_RANKS_PER_NODE=1 \
      "$BIN/dtrain-bench-train" "${B[@]}" --backend mpi-ring --gradient-wire-dtype "$wire" --world-sizes 4 \
      --metrics-file "$OUT/train_mpi-ring_sim4x1_$wire.json"
  done
fi
if [[ $PART == check || $PART == all ]] && [[ -x /usr/bin/python3 ]]; then
  "$HERE/run_projection_check.sh" "$OUT" > "$OUT/check.txt" 2>&1
  cat "$OUT/check.txt"
fi
echo "# steps:"
cat "$STEPS"
