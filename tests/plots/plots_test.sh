#!/bin/bash
# The plots: training curves from a real run's metrics file, and benchmark plots
# from committed bench/results JSON of both kinds; each PNG is checked to be one (signature and a
# non-empty IHDR). Bad input gets an error naming the file. Skips (77, with the reason) where
# Debian's python3-matplotlib is missing.
#   plots_test.sh SOURCE_DIR MPIEXEC "MPI FLAGS" DTRAIN_TRAIN
set -u
src=$1
mpiexec=$2
read -r -a mpi_flags <<<"$3"
train=$4
py=/usr/bin/python3
if ! "$py" -c "import matplotlib" 2> /dev/null; then
  echo "SKIP: $py has no matplotlib (Debian: python3-matplotlib)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
is_png() {  # is_png FILE: the PNG signature, then an IHDR with a width and height above 100
  "$py" - "$1" << 'PYEOF' || fail "$1 is not a plausible PNG"
import struct, sys
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "no PNG signature"
assert data[12:16] == b"IHDR", "no IHDR"
width, height = struct.unpack(">II", data[16:24])
assert width > 100 and height > 100, f"{width}x{height}"
print(f"{sys.argv[1]}: PNG {width}x{height}, {len(data)} bytes")
PYEOF
}

"$mpiexec" "${mpi_flags[@]}" -np 2 "$train" --model small-resnet --blocks_per_stage 1,1 --width 4 --image_size 16 \
  --synthetic_samples 64 --batch_per_rank 8 --epochs 2 --log_every_steps 2 --loader_threads 1 \
  --metrics-file m.jsonl > run.log 2>&1 || { cat run.log; fail "the training run failed"; }
"$py" "$src/scripts/plot_metrics.py" m.jsonl curves.png | tee plot.log || fail "plot_metrics failed"
grep -q "wrote curves.png (4 train, 2 validation records)" plot.log || fail "expected 4 train and 2 validation records"
is_png curves.png

head -1 m.jsonl > only_header.jsonl
"$py" "$src/scripts/plot_metrics.py" only_header.jsonl none.png > bad.log 2>&1 && fail "a file without records plotted"
grep -q "only_header.jsonl has no train or validation records" bad.log || fail "unexpected error: $(cat bad.log)"
[ -e none.png ] && fail "a failed plot left none.png"

results=$src/bench/results
"$py" "$src/bench/plot_bench.py" scaling.png "$results"/2026-11-23_h200x2/multinode_and_loader/mn/train_{nccl,hierarchical}.json ||
  fail "plot_bench (train) failed"
is_png scaling.png
"$py" "$src/bench/plot_bench.py" busbw.png "$results"/2026-11-21_cpu/sim_10gbit/allreduce_{hierarchical,raw-mpi}_np4.json ||
  fail "plot_bench (allreduce) failed"
is_png busbw.png
"$py" "$src/bench/plot_bench.py" mixed.png "$results"/2026-11-23_h200x2/multinode_and_loader/mn/train_nccl.json \
  "$results"/2026-11-21_cpu/sim_10gbit/allreduce_raw-mpi_np4.json > mixed.log 2>&1 && fail "mixed kinds plotted"
grep -q "one kind per plot" mixed.log || fail "unexpected error: $(cat mixed.log)"
echo "PASS"
