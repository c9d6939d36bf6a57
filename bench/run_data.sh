#!/bin/bash
# The data loader alone, dtrain's beside torchvision's, on the same folder in the same call:
# dtrain-bench-data, then bench/peers/torchvision_loader.py, then a comparison table. Logs and JSON
# go to $OUT. Run from the repository root with build/bin built (Release).
#   bench/run_data.sh DATA_DIR [THREADS]     (THREADS: default 1,2,4,14)
# When DATA_DIR does not exist, the realistic tree (bench/make_jpeg_tree.sh) is generated there
# first. Both loaders read the files from the page cache: the tree is read once before either runs.
# Environment: OUT (default /tmp/bench_data), BIN (build/bin), PY (the peer's python, default
# /opt/torch/.venv/bin/python), BATCH (256), BATCHES (20), ROUNDS (3: each row the median of that many
# interleaved passes, for both loaders).
set -u -o pipefail
DATA=${1:?usage: bench/run_data.sh DATA_DIR [THREADS]}
THREADS=${2:-1,2,4,14}
OUT=${OUT:-/tmp/bench_data}
BIN=${BIN:-build/bin}
PY=${PY:-/opt/torch/.venv/bin/python}
BATCH=${BATCH:-256}
BATCHES=${BATCHES:-20}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"

if [ ! -d "$DATA" ]; then
  echo "== generating the realistic tree in $DATA"
  bench/make_jpeg_tree.sh "$DATA" 2>&1 | tee "$OUT/make_tree.log" || exit 1
fi
{ echo "host: $(hostname)"; echo "nproc: $(nproc)"; lscpu 2>/dev/null | grep -E "^(Model name|Socket|Core|Thread|CPU\(s\)|NUMA node\(s\))"; \
  echo "git: $(git rev-parse --short HEAD 2>/dev/null) $(git status --porcelain 2>/dev/null | grep -c . ) changed files"; } > "$OUT/machine.txt"
SPLIT=$DATA
[ -d "$DATA/train" ] && SPLIT=$DATA/train
echo "== reading $SPLIT once into the page cache"
find "$SPLIT" -type f -print0 | xargs -0 cat > /dev/null

echo "== dtrain-bench-data"
timeout 900 "$BIN/dtrain-bench-data" --data-dir "$DATA" --loader-threads "$THREADS" --batch-per-rank "$BATCH" --batches "$BATCHES" \
  --rounds "$ROUNDS" --metrics-file "$OUT/dtrain_data.json" 2>&1 | tee "$OUT/dtrain_data.log"
ours=$?
echo "== torchvision DataLoader"
timeout 1800 "$PY" bench/peers/torchvision_loader.py --data_dir "$DATA" --threads "$THREADS" --batch-per-rank "$BATCH" \
  --batches "$BATCHES" --rounds "$ROUNDS" --metrics-file "$OUT/torchvision_data.json" 2>&1 | grep -v "UserWarning\|warnings.warn" | tee "$OUT/torchvision_data.log"
peer=$?
if [ "$ours" != 0 ] || [ "$peer" != 0 ]; then
  echo "dtrain-bench-data exit $ours, peer exit $peer: no comparison" >&2
  exit 1
fi

# Ours against the peer per thread count, and each one's scaling from its first row to its last.
COMPARE=$(command -v python3 || echo "$PY")
"$COMPARE" - "$OUT/dtrain_data.json" "$OUT/torchvision_data.json" <<'PYEOF' | tee "$OUT/comparison.txt"
import json, sys
ours, peer = (json.load(open(p)) for p in sys.argv[1:3])
by_threads = {r["threads"]: r for r in peer["rows"]}
print(f"# dtrain DataLoader vs torchvision DataLoader ({peer['versions']['torch']}), {ours['data_dir']}, "
      f"{ours['images']} images, batch {ours['batch']}, {ours['machine']['cpu_model']}, {ours['date']}")
print(f"# {'threads':>7} {'ours img/s':>11} {'peer img/s':>11} {'ours /thread':>13} {'peer /worker':>13} {'ratio':>6}")
for r in ours["rows"]:
    p = by_threads.get(r["threads"])
    if p is None:
        continue
    ratio = r["img_per_sec_per_thread"] / p["img_per_sec_per_thread"]
    print(f"  {r['threads']:7d} {r['img_per_sec']:11.1f} {p['img_per_sec']:11.1f} {r['img_per_sec_per_thread']:13.1f} "
          f"{p['img_per_sec_per_thread']:13.1f} {ratio:5.2f}x")
def scaling(result):
    first, last = result["rows"][0], result["rows"][-1]
    return first["threads"], last["threads"], 100.0 * last["img_per_sec_per_thread"] / first["img_per_sec_per_thread"]
def round_scalings(result):  # each round's last row against the same round's first: the noise of one pass
    first, last = result["rows"][0], result["rows"][-1]
    pairs = zip(first.get("round_img_per_sec", []), last.get("round_img_per_sec", []))
    return sorted(100.0 * (b / last["threads"]) / (a / first["threads"]) for a, b in pairs)
for name, result in (("ours", ours), ("peer", peer)):
    lo, hi, percent = scaling(result)
    print(f"# {name}: {lo} -> {hi} threads at {percent:.1f}% of linear (img/s per thread at {hi} over at {lo})")
    each = round_scalings(result)
    if len(each) > 1:
        print(f"#   round by round: {', '.join(f'{x:.1f}%' for x in each)} (sorted; median {each[len(each) // 2]:.1f}%)")
clock = ours["rows"][-1].get("clock_linear_percent")
if clock:
    print(f"# the machine: a loop that touches no memory keeps {clock:.1f}% of its 1-thread rate per thread at "
          f"{ours['rows'][-1]['threads']} threads (dtrain-bench-data's clock probe, run beside each row); "
          f"ours against that ceiling: {100.0 * scaling(ours)[2] / clock:.1f}%")
print("# the bar: ratio >= 1.5x per worker, ours >= 85% of linear from 1 to 14 threads")
PYEOF
