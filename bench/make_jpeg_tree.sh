#!/bin/bash
# The realistic JPEG tree of the data-loader and real-data training benchmarks:
# 100 classes x (138 train + 10 val) = 13,800 + 1,000 photo-like JPEGs with ImageNet's image sizes
# (mean ~500x390) and file sizes (30-150 KiB, ~110 KiB at 500x375), quality 75-95, mostly 4:2:0,
# some 4:4:4, ~1% greyscale and ~1% CMYK. The same bytes for the same seed on any machine.
#   bench/make_jpeg_tree.sh DIR [THREADS]      (THREADS: default all cores; BIN=build/bin)
set -eu
DIR=${1:?usage: bench/make_jpeg_tree.sh DIR [THREADS]}
THREADS=${2:-$(nproc)}
BIN=${BIN:-build/bin}
TOOL=$BIN/tests/dtrain-make-image-tree  # a test tool: in bin/tests of a build tree, or carried flat
[ -x "$TOOL" ] || TOOL=$BIN/dtrain-make-image-tree
exec "$TOOL" "$DIR" --realistic --classes 100 --train-per-class 138 --val-per-class 10 \
  --seed 1 --threads "$THREADS"
