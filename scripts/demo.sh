#!/usr/bin/env bash
# The demo: install what it needs and is missing (the build's packages and Fashion-MNIST; not the
# test suite's clang-format or Slurm daemons), build dtrain-info and dtrain-train, show where the 2
# local ranks run, then train a small ResNet on Fashion-MNIST on them for one epoch (about two
# minutes on 2 cores) and print its validation accuracy (about 85% top-1).
#   scripts/demo.sh                  one epoch
#   scripts/demo.sh --epochs 3       any dtrain-train flags are passed on (3 epochs: about 89.7%)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install_deps.sh --demo
scripts/configure.sh
cmake --build build -j"$(nproc)" --target dtrain-info dtrain-train

mpi_flags=(--oversubscribe)
[[ $(id -u) -eq 0 ]] && mpi_flags+=(--allow-run-as-root)
mpirun "${mpi_flags[@]}" -np 2 build/bin/dtrain-info
exec mpirun "${mpi_flags[@]}" -np 2 build/bin/dtrain-train --config configs/fashion_mnist_resnet.pbtxt --epochs 1 "$@"
