#!/usr/bin/env bash
# dtrain-bench-library runs on 2 ranks with tiny sizes, checks its own sums, and writes JSON that
# bench/summarize_library.py reads (every field the summary uses); a bad flag is an error naming it.
# No timing is asserted: this is a smoke test of the benchmark, not a benchmark.
#   bench_smoke.sh BENCH SOURCE_DIR SCRATCH MPIRUN...
set -euo pipefail
bench=$1 source=$2 scratch=$3
shift 3
rm -rf "$scratch"
mkdir -p "$scratch"
"$@" -np 2 "$bench" --latency-calls 20 --latency-reps 2 --sizes 4K,64K -w 1 --iters 2 --fusion-ops 50 --fusion-reps 2 \
  --json "$scratch/library_np2_r1.json" | tee "$scratch/out.txt"
grep -q "# all correct" "$scratch/out.txt"
/usr/bin/python3 - "$scratch/library_np2_r1.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["world_size"] == 2, j["world_size"]
assert j["latency"]["calls"] == 20 and j["latency"]["operations"] == 40, j["latency"]
assert 1 <= j["latency"]["collectives"] <= 40, j["latency"]
rows = j["bandwidth"]["results"]
assert sorted({(r["target"], r["bytes"], r["inplace"]) for r in rows}) == sorted(
    (t, b, i) for t in ("dtrain-abi", "mpi-allreduce") for b in (4096, 65536) for i in (False, True)), rows
assert all(r["wrong"] == 0 and r["time_us"] > 0 for r in rows), rows
f = j["fusion"]
assert f["operations"] == 50 and 1 <= f["collectives"]["min"] <= f["collectives"]["max"] <= 50, f
print("bench_smoke: JSON parsed, %d bandwidth rows, fusion ran 50 operations in %g-%g collectives"
      % (len(rows), f["collectives"]["min"], f["collectives"]["max"]))
PY
/usr/bin/python3 "$source/bench/summarize_library.py" "$scratch" >"$scratch/summary.md"
grep -q "^| 2 | 64 KiB | yes |" "$scratch/summary.md" && exit 1  # no communicator rows here: none compared
grep -q "^| 2 | \*\*" "$scratch/summary.md"
if "$@" -np 1 "$bench" --sizes 3 >"$scratch/bad.txt" 2>&1; then
  echo "FAIL: --sizes 3 was accepted"
  exit 1
fi
grep -q -- "--sizes '3': expected a size" "$scratch/bad.txt"
echo "bench_smoke: all checks passed"
