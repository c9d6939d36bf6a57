#!/usr/bin/env bash
# Comments say why, never "issue 14": the reader of the code has no tracker to look it up in. Fails
# naming each line of the sources, build files and scripts that points to an issue number.
#   check_no_tracker_references.sh [SOURCE_DIR]
set -euo pipefail
cd "${1:-$(dirname "$0")/../..}"
hits=$(grep -rnE '[Ii]ssues? ?#?[0-9]+' runtime comm models train launcher bench tests scripts cluster cmake CMakeLists.txt \
  --include='*.h' --include='*.cc' --include='*.cu' --include='*.cuh' --include='*.proto' --include='*.sh' \
  --include='*.py' --include='*.cmake' --include='CMakeLists.txt' --include='*.sbatch' --exclude-dir=results |
  grep -v '^tests/style/check_no_tracker_references.sh:' || true)
if [[ -n $hits ]]; then
  echo "$hits" | sed 's/^/FAIL /'
  echo "check_no_tracker_references: $(echo "$hits" | wc -l) lines point to an issue number; say the reason instead"
  exit 1
fi
echo "check_no_tracker_references: no line points to an issue number"
