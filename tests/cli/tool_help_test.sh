#!/bin/bash
# Every tool answers --help (exit 0, a usage line) and --version (exit 0, "TOOL (dtrain VERSION)"),
# and the tools speak one vocabulary: flags are hyphenated, and a concept shared by
# several tools has one name everywhere.
#   tool_help_test.sh TOOL...
set -u
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# Shared concepts: the one name, and the names other tools used for it before.
declare -A retired=([--batch]=--batch-per-rank [--lr]=--base-lr [--warmup]=--timing-warmup-steps
                    [--json]=--metrics-file [--threads]=--loader-threads [--prefetch]=--prefetch-batches)
for tool in "$@"; do
  name=$(basename "$tool")
  help=$("$tool" --help 2>&1)
  rc=$?
  [ "$rc" = 0 ] || bad "$name --help exited $rc"
  grep -q "^usage: $name" <<<"$help" || bad "$name --help prints no 'usage: $name' line"
  version=$("$tool" --version 2>&1)
  rc=$?
  [ "$rc" = 0 ] || bad "$name --version exited $rc"
  grep -Eq "^$name \(dtrain [0-9]+\.[0-9]+\.[0-9]+\)$" <<<"$version" || bad "$name --version printed '$version'"
  flags=$(grep -oE -- "--[A-Za-z0-9_-]+" <<<"$help" | sort -u)
  underscored=$(grep "_" <<<"$flags" | tr '\n' ' ')
  [ -z "$underscored" ] || bad "$name: flags with underscores in --help (hyphens are canonical): $underscored"
  for old in "${!retired[@]}"; do
    # dtrain-make-image-tree's --threads are its writer threads, not a loader's.
    [ "$name" = dtrain-make-image-tree ] && [ "$old" = --threads ] && continue
    grep -qx -- "$old" <<<"$flags" && bad "$name has $old; the shared name is ${retired[$old]}"
  done
  echo "$name: $(wc -l <<<"$flags") flags, help and version fine"
done
[ "$fail" = 0 ] && echo "PASS: $# tools"
exit "$fail"
