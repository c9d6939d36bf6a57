#!/usr/bin/env bash
# dtrain.torch against torch.distributed (gloo) on CPU tensors: all-reduce of 64 MiB fp32 and of 4
# bytes on 2 and 4 ranks, bench/torch/cpu_allreduce.py for both, interleaved over --rounds so that
# the load of a shared machine falls on all alike; summary.txt holds each round's rows and the
# medians over rounds. dtrain runs twice: as configured (its host all-reduces through shared memory
# on one host) and as "dtrain-ring" with DTRAIN_SHM_ALLREDUCE=0 (every byte through MPI's ring).
#   OUT=bench/results/<date>_cpu/torch_allreduce bench/torch/run_cpu.sh [ROUNDS]
# libdtrain.so.1 from $DTRAIN_LIBRARY (default build/lib/libdtrain.so.1); Python /usr/bin/python3
# (Debian's python3-torch) unless $PY says otherwise; $MPIRUN_FLAGS are added to every mpirun (on
# the GPU hosts: CUDA_VISIBLE_DEVICES= in the environment, and their Open MPI settings).
set -euo pipefail
ROUNDS=${1:-3}
OUT=${OUT:-/tmp/dtrain_torch_cpu_bench}
PY=${PY:-/usr/bin/python3}
export DTRAIN_LIBRARY=${DTRAIN_LIBRARY:-$PWD/build/lib/libdtrain.so.1}
export PYTHONPATH=$PWD/python PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
read -r -a extra <<< "${MPIRUN_FLAGS:-}"
mkdir -p "$OUT"
: > "$OUT/summary.txt"
for np in 2 4; do
  for round in $(seq "$ROUNDS"); do
    for variant in dtrain dtrain-ring gloo; do
      shm=1 rename="s/^//"
      [[ $variant == dtrain-ring ]] && shm=0 rename="s/^  dtrain /dtrain-ring /"
      mpirun --allow-run-as-root --oversubscribe "${extra[@]}" -x DTRAIN_SHM_ALLREDUCE=$shm -np "$np" "$PY" \
        bench/torch/cpu_allreduce.py --backend "${variant%-ring}" --json "$OUT/${variant}_np${np}_r${round}.json" 2>&1 |
        grep -v " INFO " | sed "$rename" | tee -a "$OUT/summary.txt"
    done
  done
done
"$PY" - "$OUT" <<'PYEOF' | tee -a "$OUT/summary.txt"
import glob, json, os, statistics, sys
rows = []
for f in glob.glob(sys.argv[1] + "/*.json"):
    variant = os.path.basename(f).split("_np")[0]
    rows += [dict(r, variant=variant) for r in json.load(open(f))]
print("\nmedian over rounds (time per all-reduce)")
for ranks in sorted({r["ranks"] for r in rows}):
    for nbytes in sorted({r["bytes"] for r in rows}, reverse=True):
        t = {v: statistics.median(r["median_s"] for r in rows if r["variant"] == v and r["ranks"] == ranks
                                  and r["bytes"] == nbytes) for v in ("dtrain", "dtrain-ring", "gloo")}
        print(f"{ranks} ranks, {nbytes:>9} B: dtrain {t['dtrain'] * 1e6:9.1f} us, dtrain-ring {t['dtrain-ring'] * 1e6:9.1f} us, "
              f"gloo {t['gloo'] * 1e6:9.1f} us, gloo/dtrain {t['gloo'] / t['dtrain']:.2f}x")
PYEOF
