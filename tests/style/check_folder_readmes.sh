#!/usr/bin/env bash
# Every library folder says what it owns: a README.md whose first line is "# <folder>/: ..."
# (one paragraph). Fails naming each folder with sources and without one.
#   check_folder_readmes.sh [SOURCE_DIR]
set -euo pipefail
cd "${1:-$(dirname "$0")/../..}"
missing=0 folders=0
while IFS= read -r dir; do
  ls "$dir" | grep -qE '\.(h|cc|cu|cuh|proto)$' || continue
  folders=$((folders + 1))
  if [[ ! -f $dir/README.md ]] || ! head -1 "$dir/README.md" | grep -q "^# $dir/: "; then
    echo "FAIL $dir/ has no README.md whose first line is \"# $dir/: what this folder owns\""
    missing=$((missing + 1))
  fi
done < <(find runtime comm library models train launcher -type d | sort)
echo "check_folder_readmes: $folders library folders, $missing without a README that says what they own"
((folders > 0 && missing == 0))
