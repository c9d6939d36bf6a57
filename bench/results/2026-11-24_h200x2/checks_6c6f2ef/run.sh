#!/bin/bash
# Device run at 6c6f2ef on nvidia-h200-x2 (lent late in the session): scripts/gpu_checks.sh with
# 2 GPUs (nccl rank equivalence, comm robustness and device collectives on 2 GPUs, the multi-node
# tests with one GPU per simulated node), then bench/run_gpu_multinode.sh bench (issue 13: 2 GPUs as
# 2 simulated nodes, hierarchical / mpi-ring / nccl, and the 64 MiB device all-reduces).
# Binaries carried xz'd in .carry/bin (the timeline and export checks' binaries left out: run on
# one H200 in checks_6c6f2ef), Fashion-MNIST in .carry/fmnist.
set -u
mkdir -p /tmp/b
for f in .carry/bin/*.xz; do (xz -dc "$f" > /tmp/b/$(basename "$f" .xz) && chmod +x /tmp/b/$(basename "$f" .xz)) & done; wait
nvidia-smi -L | tee $OUT/gpu.txt
OUT=/tmp/gc BIN=/tmp/b timeout 330 scripts/gpu_checks.sh .carry/fmnist > $OUT/gpu_checks_summary.txt 2>&1
rm -rf /tmp/gc/tensorboard /tmp/gc/timeline; tar czf $OUT/gpu_checks_logs.tgz -C /tmp gc
BIN=/tmp/b OUT=/tmp/mn timeout 240 bench/run_gpu_multinode.sh bench > $OUT/multinode.txt 2>&1
tar czf $OUT/multinode_logs.tgz -C /tmp mn
