#!/usr/bin/env bash
# Checks that every C++ and CUDA source in the repository is formatted by .clang-format, with
# clang-format 14 (Debian 12's; other versions format some constructs differently).
#   scripts/check_format.sh          report the files that differ (exit 1 if any)
#   scripts/check_format.sh --fix    reformat them in place
# Exit 77 (a skip, with the reason) when clang-format 14 is not installed.
set -uo pipefail
cd "$(dirname "$0")/.."

tool=
for candidate in clang-format-14 clang-format; do
  if command -v "$candidate" >/dev/null && "$candidate" --version | grep -q "version 14\."; then
    tool=$candidate
    break
  fi
done
if [[ -z $tool ]]; then
  echo "SKIP: clang-format 14 is not installed (scripts/install_deps.sh installs clang-format-14)"
  exit 77
fi

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh')
else
  mapfile -t files < <(find . -path ./build -prune -o \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print)
fi

if [[ ${1:-} == --fix ]]; then
  "$tool" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$tool" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]} > 0)); then
  echo "FAIL: ${#bad[@]} of ${#files[@]} files are not formatted by .clang-format ($tool); fix with scripts/check_format.sh --fix:"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "PASS: ${#files[@]} files formatted by .clang-format ($tool)"
