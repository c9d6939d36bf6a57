#!/usr/bin/env bash
# Where a multi-node step loses time, in one device call on nvidia-h100-x4 (4 GPUs of one host as
# 2 simulated nodes x 2 GPUs, DTRAIN_RANKS_PER_NODE=2, the staged host path between them as in
# run_gpu_multinode.sh): dtrain-train's timeline (docs/observability.md) of ResNet-50 bf16 at
# batch 256 with --backend hierarchical, fp32 and bf16 cross-node wire, and the same on one node of
# 4 GPUs with nccl for the single-node figure; each trace checked (check_timeline.py --hierarchical
# 2: every bucket's reduce-scatter, cross-node ring and all-gather, each staged piece's D2H, host
# ring and H2D, in order, inside its bucket) and summarized (timeline_phases.py: per step backward
# end, last bucket end, the tail, per-phase totals). First the GPU timeline test (2 ranks, mpi-ring
# and hierarchical). About 4 minutes; every step has a time limit; logs, traces and summaries go to
# $OUT (phases_*.txt are what to read; trace_*.json open in ui.perfetto.dev).
#   BIN=build/bin OUT=/tmp/out bench/run_gpu_timeline_phases.sh
set -uo pipefail
BIN=${BIN:-build/bin}
OUT=${OUT:-/tmp/dtrain_timeline_phases}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3
mkdir -p "$OUT"
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
MPI=(mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x NCCL_DEBUG)
STEPS=$OUT/steps.txt
touch "$STEPS"
source "$HERE/timed_step.sh" # step NAME LIMIT_S COMMAND...

nvidia-smi -L > "$OUT/gpus.txt" 2>&1
step timeline_gpu_test_np2 180 "${MPI[@]}" -np 2 "$BIN/tests/dtrain-train-timeline-gpu-mpi-tests"

# Steps 21-25 after 20 of warm-up; 12,800 synthetic images are 12 steps of 4 x 256 per epoch.
TRAIN=(--device gpu --precision bf16 --dataset synthetic --synthetic_samples 12800 --batch_per_rank 256
  --epochs 3 --max-total-steps 25 --log_every_steps 5 --max_validation_batches 1 --loader_threads 3
  --timeline-steps 21:25)
for wire in fp32 bf16; do
  name=hierarchical_2x2_$wire
  step "$name" 300 "${MPI[@]}" -np 4 -x DTRAIN_RANKS_PER_NODE=2 -x DTRAIN_MPI_DEVICE_POINTERS=stage \
    "$BIN/dtrain-train" "${TRAIN[@]}" --backend hierarchical --gradient_wire_dtype "$wire" \
    --run-dir "$OUT/run_$name" --timeline "$OUT/trace_$name.json"
  step "check_$name" 60 "$PY" "$ROOT/scripts/check_timeline.py" "$OUT/trace_$name.json" --ranks 4 --steps 21:25 \
    --device gpu --hierarchical 2
  "$PY" "$ROOT/scripts/timeline_phases.py" "$OUT/trace_$name.json" > "$OUT/phases_$name.txt" 2>&1
done
name=nccl_1x4
step "$name" 300 "${MPI[@]}" -np 4 "$BIN/dtrain-train" "${TRAIN[@]}" --backend nccl --run-dir "$OUT/run_$name" \
  --timeline "$OUT/trace_$name.json"
step "check_$name" 60 "$PY" "$ROOT/scripts/check_timeline.py" "$OUT/trace_$name.json" --ranks 4 --steps 21:25 \
  --device gpu
"$PY" "$ROOT/scripts/timeline_phases.py" "$OUT/trace_$name.json" > "$OUT/phases_$name.txt" 2>&1

for f in "$OUT"/phases_*.txt; do
  echo "=== $(basename "$f" .txt)"
  grep -A20 "^mean of" "$f" || tail -3 "$f"
done
cat "$STEPS"
