#!/usr/bin/env bash
# Configures build/ (once; later runs reuse the cache, so builds stay incremental).
# CUDA is on wherever the toolkit is present, as on CI: DTRAIN_CUDA=ON then fails loudly if cuDNN
# or NCCL is missing instead of silently building CPU-only. Override with DTRAIN_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."

cuda=${DTRAIN_CUDA:-}
if [[ -z $cuda ]]; then
  if [[ -x /usr/local/cuda/bin/nvcc ]] || command -v nvcc >/dev/null; then cuda=ON; else cuda=OFF; fi
fi
if [[ ! -f build/CMakeCache.txt ]] || ! grep -q "^DTRAIN_CUDA:STRING=${cuda}$" build/CMakeCache.txt; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DDTRAIN_CUDA="${cuda}" "$@"
fi
