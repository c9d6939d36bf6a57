#!/usr/bin/env bash
# The library as a user gets it: install the build into a scratch prefix, move the prefix (nothing
# may name where it was installed), build examples/mlp against it with find_package(dtrain), run it
# on 1, 2, 3 and 4 ranks, and require the losses of N ranks with batch B each to equal the loss of
# 1 rank with batch N x B (data parallelism changes nothing but the speed).
#   example_installed.sh BUILD_DIR SOURCE_DIR SCRATCH MPIEXEC [MPIEXEC_FLAGS...]
set -euo pipefail
build=$1 source=$2 scratch=$3 mpiexec=$4
shift 4
mpirun=("$mpiexec" "$@")
rm -rf "$scratch"
mkdir -p "$scratch"

cmake --install "$build" --prefix "$scratch/installed" >"$scratch/install.log"
mv "$scratch/installed" "$scratch/prefix"
prefix=$scratch/prefix
for f in "$prefix/include/dtrain/dtrain.h" "$prefix/lib/cmake/dtrain/dtrain-config.cmake" \
         "$prefix/lib/cmake/dtrain/dtrain-config-version.cmake" "$prefix/bin/dtrain-run" "$prefix/bin/dtrain-train"; do
  [[ -e $f ]] || { echo "FAIL: the prefix lacks $f"; exit 1; }
done
if grep -rl -e "$scratch/installed" -e "$build" "$prefix/lib/cmake" "$prefix/include"; then
  echo "FAIL: the files above name the build tree or the original prefix"
  exit 1
fi

cmake -S "$source/examples/mlp" -B "$scratch/example" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  >"$scratch/configure.log"
cmake --build "$scratch/example" >"$scratch/build.log"
example=$scratch/example/dtrain-mlp
readelf -d "$example" | grep -q 'NEEDED.*libdtrain\.so\.[0-9]' || { echo "FAIL: dtrain-mlp does not link libdtrain.so.N"; exit 1; }

final_loss() {  # NP BATCH_PER_RANK
  "${mpirun[@]}" -np "$1" "$example" --batch-per-rank "$2" --steps 40 | tee "$scratch/np$1.log" >&2
  sed -n 's/^final loss \([^ ]*\) .*/\1/p' "$scratch/np$1.log"
}
one=$(final_loss 1 24)
two=$(final_loss 2 12)
three=$(final_loss 3 8)
four=$(final_loss 4 6)
echo "final loss, global batch 24: 1 rank $one, 2 ranks $two, 3 ranks $three, 4 ranks $four"
python3 - "$one" "$two" "$three" "$four" <<'PY'
import sys
one, *others = map(float, sys.argv[1:])
# fp64 sums in another order: agreement to 1e-9 relative, far below any real difference.
bad = [x for x in others if abs(x - one) > 1e-9 * abs(one)]
if not one < 1 or bad:
    sys.exit(f"FAIL: losses differ from the 1-rank run {one}: {bad}" if bad else f"FAIL: loss {one} did not fall")
print("example: the N-rank losses equal the 1-rank loss")
PY
