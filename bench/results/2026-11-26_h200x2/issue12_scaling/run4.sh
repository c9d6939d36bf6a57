#!/bin/bash
# Issue 12's last bar (dtrain-bench-data 1 -> 14 threads at >= 85% of linear), measured with more
# power than the three calls of 2026-11-26 (3-5 rounds of 10-20 batches: 84.8%, 88.7%, 82.3%):
#   1. bench/probe_cpu_scaling.sh: the machine's own ceiling with nothing of ours shared (14
#      independent single-threaded processes against one alone, 3 interleaved repeats);
#   2. bench/run_data.sh 1,14: ours and torchvision's DataLoader, 7 interleaved rounds of 24 batches.
# Binaries of b23617c (no C++ changed since), carried as .carry/bin/*.xz.
set -u
mkdir -p build/bin
for b in dtrain-bench-data dtrain-make-image-tree; do xz -dc .carry/bin/$b.xz > build/bin/$b && chmod +x build/bin/$b; done
{ nvidia-smi -L; echo "nproc $(nproc)"; lscpu; echo "git $(git rev-parse --short HEAD 2>/dev/null)"; } > "$OUT/machine.txt" 2>&1
t0=$(date +%s)
bench/make_jpeg_tree.sh /tmp/tree > "$OUT/tree.log" 2>&1
echo "tree: exit $? at $(( $(date +%s) - t0 )) s, $(find /tmp/tree/train -type f | wc -l) training files"
OUT=$OUT/probe BATCHES=12 REPEATS=3 timeout 170 bench/probe_cpu_scaling.sh /tmp/tree 14
echo "probe: exit $? at $(( $(date +%s) - t0 )) s"
OUT=$OUT/data BATCHES=24 ROUNDS=7 timeout 380 bench/run_data.sh /tmp/tree 1,14 2>&1 | grep -v "^round"
echo "run_data: exit $? at $(( $(date +%s) - t0 )) s"
