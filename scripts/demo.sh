#!/usr/bin/env bash
# The demo: install what is missing, build, and run the main job on 2 local ranks.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install_deps.sh
scripts/configure.sh
cmake --build build -j"$(nproc)" --target dtrain-info

mpi_flags=(--oversubscribe)
[[ $(id -u) -eq 0 ]] && mpi_flags+=(--allow-run-as-root)
exec mpirun "${mpi_flags[@]}" -np 2 build/bin/dtrain-info
