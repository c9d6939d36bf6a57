#!/usr/bin/env bash
# The whole suite: install what is missing, build (CUDA on wherever the toolkit is present),
# run every test through ctest. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install_deps.sh
scripts/configure.sh
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
