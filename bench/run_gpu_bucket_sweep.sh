#!/usr/bin/env bash
# The gradient bucket sizes across nodes, measured: dtrain-bench-train, ResNet-50 bf16 b256, on
# 4 GPUs of one host as 2 simulated nodes x 2 GPUs (DTRAIN_RANKS_PER_NODE=2, hierarchical backend:
# NCCL inside a node, the staged host path across), for every --bucket-mib in $BUCKETS and
# --tail-bucket-mib in $TAILS (0: equal buckets), after one 1-GPU run that is the efficiency's
# baseline (and fills the cuDNN plan cache the others read). Picks the defaults of
# comm/gradient_sync/gradient_sync.h (kDefaultBucketMib, kDefaultTailBucketMib).
# Every run has a time limit (timed_step.sh); a JSON per run and summary.txt (one table) go to
# $OUT. About 5 min on nvidia-h100-x4 for the 12 pairs.
#   BIN=build/bin OUT=/tmp/out bench/run_gpu_bucket_sweep.sh
#   BUCKETS="8 16" TAILS="0 1" FIRST=1 bench/run_gpu_bucket_sweep.sh   (FIRST: --first-bucket-mib)
# REF_BIN=<another build's bin> adds a row of that build at its default buckets (a build from
# before bucket plans: equal 25 MiB buckets, the classifier's one held until backward ended).
set -uo pipefail
BIN=${BIN:-build/bin}
OUT=${OUT:-/tmp/dtrain_bucket_sweep}
BUCKETS=${BUCKETS:-4 8 16 25}
TAILS=${TAILS:-0 1 2}
FIRST=${FIRST:-0}
mkdir -p "$OUT"
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export DTRAIN_PLAN_CACHE=${DTRAIN_PLAN_CACHE:-$OUT/plan_cache}
export DTRAIN_RANKS_PER_NODE=2 DTRAIN_MPI_DEVICE_POINTERS=stage
MPI=(mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x NCCL_DEBUG -x DTRAIN_PLAN_CACHE
     -x DTRAIN_RANKS_PER_NODE -x DTRAIN_MPI_DEVICE_POINTERS)
TRAIN=(--precision bf16 --batch-per-rank 256 --timing-warmup-steps 10 --steps 25)
: > "$OUT/steps.txt"

source "$(dirname "$0")/timed_step.sh"  # step NAME LIMIT_S COMMAND...

nvidia-smi -L > "$OUT/gpus.txt" 2>&1
step baseline_1gpu 180 "${MPI[@]}" -np 1 "$BIN/dtrain-bench-train" "${TRAIN[@]}" --world-sizes 1 \
  --metrics-file "$OUT/baseline_1gpu.json"
if [[ -n ${REF_BIN:-} ]]; then
  step reference_build 90 "${MPI[@]}" -np 4 "$REF_BIN/dtrain-bench-train" "${TRAIN[@]}" --backend hierarchical \
    --world-sizes 4 --metrics-file "$OUT/reference_build.json"
fi
for bucket in $BUCKETS; do
  for tail in $TAILS; do
    step "sim2x2_bucket${bucket}_tail${tail}" 90 "${MPI[@]}" -np 4 "$BIN/dtrain-bench-train" "${TRAIN[@]}" \
      --backend hierarchical --world-sizes 4 --bucket-mib "$bucket" --tail-bucket-mib "$tail" \
      --first-bucket-mib "$FIRST" --metrics-file "$OUT/sim2x2_bucket${bucket}_tail${tail}.json"
  done
done

python3 - "$OUT" > "$OUT/summary.txt" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
print("# gradient bucket sweep, ResNet-50 bf16 b256, 4 GPUs as 2 simulated nodes x 2 (hierarchical);",
      open(os.path.join(out, "gpus.txt")).read().strip().split("\n")[0])
base = None
path = os.path.join(out, "baseline_1gpu.json")
if os.path.exists(path):
    base = json.load(open(path))[0]["img_per_sec_per_gpu"]
print("# 1 GPU: %s img/s (the efficiency's baseline)" % (base if base else "no result"))
print("%7s %5s %6s %8s %9s %10s %10s %10s" % ("bucket", "tail", "first", "buckets", "overlap", "step(ms)",
                                              "img/s/GPU", "efficiency"))
rows = []
for path in glob.glob(os.path.join(out, "sim2x2_bucket*_tail*.json")):
    r = json.load(open(path))[0]
    rows.append(r)
rows.sort(key=lambda r: (r["bucket_mib"], r["tail_bucket_mib"]))
for r in rows:
    eff = "%.1f%%" % (100 * r["img_per_sec_per_gpu"] / base) if base else "-"
    print("%7d %5d %6d %8d %9d %10.2f %10.1f %10s" % (r["bucket_mib"], r["tail_bucket_mib"], r["first_bucket_mib"],
          r["buckets"], r["buckets_during_backward"], r["step_ms_median"], r["img_per_sec_per_gpu"], eff))
path = os.path.join(out, "reference_build.json")
if os.path.exists(path):
    r = json.load(open(path))[0]
    eff = "%.1f%%" % (100 * r["img_per_sec_per_gpu"] / base) if base else "-"
    print("%-31s %9s %10.2f %10.1f %10s  (REF_BIN, its defaults)" % ("reference build", "-", r["step_ms_median"],
          r["img_per_sec_per_gpu"], eff))
if rows:
    best = max(rows, key=lambda r: r["img_per_sec_per_gpu"])
    print("# fastest: --bucket-mib %d --tail-bucket-mib %d" % (best["bucket_mib"], best["tail_bucket_mib"]))
print("\n## runs (time limit each; HUNG = killed or watchdog)")
print(open(os.path.join(out, "steps.txt")).read().rstrip())
PY
cat "$OUT/summary.txt"
