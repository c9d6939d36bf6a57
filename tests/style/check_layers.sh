#!/usr/bin/env bash
# The folder tree is the layers, read bottom to top: runtime/ -> comm/, models/ -> train/ ->
# launcher/, bench/; library/ (libdtrain.so, over its public header in include/dtrain/) sits on
# comm/. A folder includes only from itself and the layers below it, so nothing
# reaches up and comm/ and models/ stay apart (a model reports finished gradients through a
# callback; it does not know who averages them). Inside runtime/, base/ is the MPI-free part
# that dtrain-run links alone: it includes only itself. Fails naming each #include that reaches up.
#   check_layers.sh [SOURCE_DIR]
set -euo pipefail
cd "${1:-$(dirname "$0")/../..}"

# folder: the top-level folders (and runtime/base) its #include "..." lines may name.
allowed_for() {
  case $1 in
    runtime/base/*) echo "runtime/base" ;;
    runtime/*) echo "runtime" ;;
    comm/*) echo "runtime comm" ;;
    library/*) echo "runtime comm library include" ;;
    models/*) echo "runtime models" ;;
    train/*) echo "runtime comm models train" ;;
    launcher/*) echo "runtime launcher" ;;
    bench/*) echo "runtime comm library include models train launcher bench" ;;
    *) echo "" ;;
  esac
}

violations=0 checked=0
while IFS= read -r file; do
  allowed=$(allowed_for "$file")
  [[ -n $allowed ]] || continue
  checked=$((checked + 1))
  while IFS=: read -r line target; do
    ok=false
    for prefix in $allowed; do
      [[ $target == "$prefix"/* ]] && ok=true
    done
    # Generated headers (protobuf, version.h) sit under the folder of their source.
    if ! $ok; then
      echo "FAIL $file:$line includes \"$target\": ${file%%/*}/ may include only from: $allowed"
      violations=$((violations + 1))
    fi
  done < <(grep -no '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"' "$file" | sed 's/:[^"]*"\([^"]*\)"$/:\1/')
done < <(find runtime comm library models train launcher bench -type f \( -name "*.h" -o -name "*.cc" -o -name "*.cu" -o -name "*.cuh" \) | sort)

((checked > 0)) || { echo "FAIL: no source file found under runtime/ comm/ models/ train/ launcher/ bench/"; exit 1; }
echo "check_layers: $checked files, $violations includes that reach up"
((violations == 0))
