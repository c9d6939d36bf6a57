#!/bin/bash
# The realistic JPEG tree of the data-loader and real-data training benchmarks:
# 100 classes x (138 train + 10 val) = 13,800 + 1,000 photo-like JPEGs with ImageNet's image sizes
# (mean ~500x390) and file sizes (30-150 KiB, ~110 KiB at 500x375), quality 75-95, mostly 4:2:0,
# some 4:4:4, ~1% greyscale and ~1% CMYK. The same bytes for the same seed on any machine.
#   bench/make_jpeg_tree.sh DIR [THREADS]      (THREADS: default all cores; BIN=build/bin)
# TRAIN_PER_CLASS (default 138) makes a larger tree of the same kind: several ranks then step
# often enough in an epoch for its median step to mean something (13,800 images are 13 steps of
# 4 x 256).
set -eu
DIR=${1:?usage: bench/make_jpeg_tree.sh DIR [THREADS]}
THREADS=${2:-$(nproc)}
BIN=${BIN:-build/bin}
TRAIN_PER_CLASS=${TRAIN_PER_CLASS:-138}
TOOL=$BIN/tests/dtrain-make-image-tree  # a test tool: in bin/tests of a build tree, or carried flat
[ -x "$TOOL" ] || TOOL=$BIN/dtrain-make-image-tree
"$TOOL" "$DIR" --realistic --classes 100 --train-per-class "$TRAIN_PER_CLASS" --val-per-class 10 \
  --seed 1 --threads "$THREADS"
# The tree's gigabytes are dirty pages until the kernel writes them back, which it does over the
# next tens of seconds, sharing the CPUs with whatever runs meanwhile (2 x 1 training on 2 H200s
# started right after writing the tree ran up to 11% slower than a minute later, the likeliest cause:
# bench/results/2026-11-28_h200x2/s28). Written back here instead.
sync
