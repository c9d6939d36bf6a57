#!/bin/bash
# Issue 12's loader-scaling bar again, on a fresh nvidia-h200-x2 machine right after run4.sh's
# (88.3% of linear over 7 rounds of 24 batches): ours alone with 9 interleaved rounds of 30 batches,
# then bench/run_data.sh with 3 rounds of 12 batches for the torchvision peer in the same call.
set -u
mkdir -p build/bin
for b in dtrain-bench-data dtrain-make-image-tree; do xz -dc .carry/bin/$b.xz > build/bin/$b && chmod +x build/bin/$b; done
{ nvidia-smi -L; echo "nproc $(nproc)"; lscpu; echo "git $(git rev-parse --short HEAD 2>/dev/null)"; } > "$OUT/machine.txt" 2>&1
t0=$(date +%s)
bench/make_jpeg_tree.sh /tmp/tree > "$OUT/tree.log" 2>&1
echo "tree: exit $? at $(( $(date +%s) - t0 )) s, $(find /tmp/tree/train -type f | wc -l) training files"
find /tmp/tree/train -type f -print0 | xargs -0 cat > /dev/null
timeout 260 build/bin/dtrain-bench-data --data-dir /tmp/tree --loader-threads 1,14 --batch-per-rank 256 --batches 30 --rounds 9 \
  --metrics-file "$OUT/dtrain_data_rounds9.json" > "$OUT/dtrain_data_rounds9.txt" 2>&1
echo "dtrain-bench-data 9 rounds: exit $? at $(( $(date +%s) - t0 )) s"; grep -v INFO "$OUT/dtrain_data_rounds9.txt"
OUT=$OUT/data BATCHES=12 ROUNDS=3 timeout 200 bench/run_data.sh /tmp/tree 1,14 2>&1 | grep -v "^round"
echo "run_data: exit $? at $(( $(date +%s) - t0 )) s"
