#!/bin/bash
# The Python package as users install it, neither with DTRAIN_LIBRARY set:
#  1. cmake --install to a scratch prefix, moved elsewhere: PYTHONPATH=<prefix>/lib/python finds the
#     prefix's libdtrain.so by itself;
#  2. pip install --target of a copy of python/ with DTRAIN_LIBRARY given at build time: the library
#     travels inside the package.
# Each runs an allreduce on 2 ranks (Open MPI's components loaded through the library's RTLD_GLOBAL).
#   installed_test.sh BUILD_DIR SOURCE_DIR SCRATCH_DIR LIBRARY MPIRUN [MPIRUN FLAGS...]
set -euo pipefail
build=$1 source=$2 scratch=$3 library=$4
shift 4
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "skipped: PyTorch is not installed for /usr/bin/python3"
  exit 77
fi
rm -rf "$scratch" && mkdir -p "$scratch"
unset DTRAIN_LIBRARY
probe='import torch, dtrain.torch as hvd, dtrain._library as c
hvd.init()
s = hvd.allreduce(torch.ones(3) * hvd.rank(), op=hvd.Sum)
assert s.tolist() == [1.0] * 3, s
print(f"installed: rank {hvd.rank()} loaded {c.path}")'

cmake --install "$build" --prefix "$scratch/prefix" > "$scratch/install.log"
mv "$scratch/prefix" "$scratch/moved"
PYTHONPATH="$scratch/moved/lib/python" "$@" -np 2 /usr/bin/python3 -c "$probe" 2>&1 | tee "$scratch/prefix.log"
grep -q "installed: rank 1 loaded .*moved/lib/libdtrain.so.1" \
  "$scratch/prefix.log" || { echo "installed_test: the moved prefix's library was not the one loaded"; exit 1; }

if /usr/bin/python3 -m pip --version > /dev/null 2>&1; then
  cp -r "$source/python" "$scratch/python"
  DTRAIN_LIBRARY="$library" /usr/bin/python3 -m pip install --quiet --no-build-isolation --no-deps --no-index \
    --target "$scratch/site" "$scratch/python" > "$scratch/pip.log" 2>&1 || { cat "$scratch/pip.log"; exit 1; }
  PYTHONPATH="$scratch/site" "$@" -np 2 /usr/bin/python3 -c "$probe" 2>&1 | tee "$scratch/pip_run.log"
  grep -q "installed: rank 1 loaded .*site/dtrain/_lib/libdtrain.so.1" "$scratch/pip_run.log" ||
    { echo "installed_test: pip's copy of the library was not the one loaded"; exit 1; }
else
  echo "installed_test: pip is missing for /usr/bin/python3: pip install not checked"
fi
echo "installed_test: cmake --install and pip install both work"
