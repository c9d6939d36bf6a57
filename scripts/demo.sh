#!/usr/bin/env bash
# The demo: install what is missing, build, show where the 2 local ranks run, then train a small
# ResNet on Fashion-MNIST on them (a few minutes on 2 cores) and print the final test accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install_deps.sh
scripts/configure.sh
cmake --build build -j"$(nproc)" --target dtrain-info dtrain-train

mpi_flags=(--oversubscribe)
[[ $(id -u) -eq 0 ]] && mpi_flags+=(--allow-run-as-root)
mpirun "${mpi_flags[@]}" -np 2 build/bin/dtrain-info
exec mpirun "${mpi_flags[@]}" -np 2 build/bin/dtrain-train --config configs/fashion_mnist_resnet.pbtxt
