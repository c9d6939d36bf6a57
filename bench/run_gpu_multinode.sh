#!/usr/bin/env bash
# The multi-node GPU path on a 2-GPU machine (nvidia-h200-x2), the two GPUs as two simulated nodes
# (DTRAIN_RANKS_PER_NODE=1), every step under a time limit so that a hang shows as a failure:
#   1. GPU tests: ResNet-50 steps on hierarchical and staged mpi-ring (one process each: lazy
#      kernel loading happens once per process), a failed cross-node all-reduce stopping every
#      rank, rank equivalence on nccl / hierarchical / mpi-ring, mixed host and device calls,
#      the device collectives against float64;
#   2. dtrain-bench-train, ResNet-50 bf16 b256, 1 and 2 GPUs, on hierarchical, mpi-ring, nccl;
#   3. dtrain-bench-allreduce at 64 MiB with device buffers (staged mpi-ring at three piece
#      sizes, hierarchical, nccl) and a host MPI_Allreduce of the same bytes (raw-mpi), in this call;
#   4. a summary table (summary.txt).
# Run from the repository root with the binaries in $BIN; logs and JSON go to $OUT. About 6 min.
#   BIN=build/bin OUT=/tmp/out bench/run_gpu_multinode.sh [tests|bench|all]
set -uo pipefail
BIN=${BIN:-build/bin}
TESTS=$BIN/tests  # the test binaries; carried flat, they are in $BIN
[ -d "$TESTS" ] || TESTS=$BIN
OUT=${OUT:-/tmp/dtrain_multinode}
PART=${1:-all}
mkdir -p "$OUT"
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export DTRAIN_RANKS_PER_NODE=1 DTRAIN_MPI_DEVICE_POINTERS=stage
MPI=(mpirun --allow-run-as-root -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x NCCL_DEBUG -x DTRAIN_RANKS_PER_NODE
     -x DTRAIN_MPI_DEVICE_POINTERS)
RESULTS=$OUT/steps.txt
: > "$RESULTS"

source "$(dirname "$0")/timed_step.sh"  # step NAME LIMIT_S COMMAND...

nvidia-smi -L > "$OUT/gpus.txt" 2>&1
if [[ $PART != bench ]]; then
  T=$TESTS/dtrain-multinode-gpu-mpi-tests
  step train_steps_hierarchical 240 "${MPI[@]}" "$T" --gtest_filter='*/MultiNodeTraining.*/hierarchical'
  step train_steps_mpi_ring 240 "${MPI[@]}" "$T" --gtest_filter='*/MultiNodeTraining.*/mpi_ring'
  step train_fault_hierarchical 240 "${MPI[@]}" "$T" --gtest_filter='*/TrainingFaults.*/hierarchical'
  step train_fault_mpi_ring 240 "${MPI[@]}" "$T" --gtest_filter='*/TrainingFaults.*/mpi_ring'
  step rank_equivalence_backends 300 "${MPI[@]}" "$T" --gtest_filter='*/RankEquivalenceOnBackends.*'
  step comm_robustness_np2 240 "${MPI[@]}" "$TESTS/dtrain-comm-robustness-mpi-tests"
  step comm_gpu_collectives_np2 300 "${MPI[@]}" "$TESTS/dtrain-comm-gpu-mpi-tests"
  grep -h "simulated nodes, \|worst relative\|threw:" "$OUT"/train_*.log "$OUT"/rank_equivalence_backends.log \
    > "$OUT/test_lines.txt" 2>/dev/null
fi

if [[ $PART != tests ]]; then
  for backend in hierarchical mpi-ring nccl; do
    step "bench_train_$backend" 200 "${MPI[@]}" "$BIN/dtrain-bench-train" --backend "$backend" --precision bf16 \
      --batch-per-rank 256 --timing-warmup-steps 10 --steps 30 --world-sizes 1,2 --metrics-file "$OUT/train_$backend.json"
  done
  A=(-b 64M -e 64M -w 5 --iters 20)
  for piece in 1048576 4194304 16777216; do
    step "allreduce_mpi_ring_piece$piece" 120 "${MPI[@]}" -x DTRAIN_STAGING_PIECE_BYTES=$piece \
      "$BIN/dtrain-bench-allreduce" "${A[@]}" --backend mpi-ring --metrics-file "$OUT/allreduce_mpi-ring_piece$piece.json"
  done
  for backend in hierarchical nccl raw-mpi; do
    step "allreduce_$backend" 120 "${MPI[@]}" "$BIN/dtrain-bench-allreduce" "${A[@]}" --backend "$backend" \
      --metrics-file "$OUT/allreduce_$backend.json"
  done
fi

python3 - "$OUT" > "$OUT/summary.txt" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
print("# the multi-node GPU path on", open(os.path.join(out, "gpus.txt")).read().strip().replace("\n", "; "))
print("\n## steps (time limit each; HUNG = killed or watchdog)")
print(open(os.path.join(out, "steps.txt")).read().rstrip())
lines = os.path.join(out, "test_lines.txt")
if os.path.exists(lines):
    print(open(lines).read().rstrip())
print("\n## dtrain-bench-train, ResNet-50 bf16 b256, 2 GPUs as 2 simulated nodes")
print("%-13s %12s %12s %10s %11s" % ("backend", "1 GPU img/s", "2 GPU img/s", "efficiency", "step(ms) x2"))
for backend in ("hierarchical", "mpi-ring", "nccl"):
    path = os.path.join(out, "train_%s.json" % backend)
    if not os.path.exists(path):
        print("%-13s %s" % (backend, "no result")); continue
    rows = {r["world_size"]: r for r in json.load(open(path))}
    one, two = rows.get(1, {}), rows.get(2, {})
    eff = two.get("efficiency")
    print("%-13s %12s %12s %10s %11s" % (backend, one.get("img_per_sec_per_gpu", "-"), two.get("img_per_sec_total", "-"),
          "%.1f%%" % (100 * eff) if isinstance(eff, (int, float)) else "-", two.get("step_ms_median", "-")))
print("\n## dtrain-bench-allreduce, 64 MiB fp32 sum, 2 ranks on 2 simulated nodes (busbw = algbw for n=2)")
print("%-28s %-7s %10s %10s %7s" % ("backend", "buffers", "time(ms)", "busbw GB/s", "#wrong"))
host_mpi = None
for path in sorted(glob.glob(os.path.join(out, "allreduce_*.json"))):
    j = json.load(open(path))
    rows = [r for r in j["results"] if r["bytes"] == 64 << 20]
    if not rows: continue
    best = min(rows, key=lambda r: r["time_us"])
    label = os.path.basename(path)[len("allreduce_"):-len(".json")]
    buffers = "host" if j["backend"] == "raw-mpi" else "device"
    if j["backend"] == "raw-mpi": host_mpi = best["time_us"]
    print("%-28s %-7s %10.2f %10.2f %7d" % (label, buffers, best["time_us"] / 1e3, best["busbw_gbps"],
          sum(r["wrong"] for r in rows)))
if host_mpi:
    print("\nhost MPI_Allreduce of the same bytes: %.2f ms; the bar: staged mpi-ring >= 5 GB/s busbw and"
          " >= 1.5x its speed" % (host_mpi / 1e3))
EOF
cat "$OUT/summary.txt"
