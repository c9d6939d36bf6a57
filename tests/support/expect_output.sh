#!/bin/bash
# ctest helper for tests that match a command's output: ctest's PASS_REGULAR_EXPRESSION alone
# ignores the exit status, so a command that printed the right line and then crashed passed.
#   expect_output.sh STATUS PATTERN COMMAND [ARGS...]
# Runs COMMAND, prints its output, and passes only if it exits with STATUS and its output (stdout
# and stderr together) matches PATTERN, a Perl regex over the whole output in which . also matches
# a newline (as in CMake's regexes). Exit 77 (a skip, see run_if_gpu.sh) is passed on, for tests
# registered with SKIP_RETURN_CODE 77; elsewhere ctest counts it as a failure.
set -u
if [ $# -lt 3 ]; then
  echo "usage: expect_output.sh STATUS PATTERN COMMAND [ARGS...]" >&2
  exit 2
fi
status=$1
pattern=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" > "$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" -eq 77 ] && [ "$status" -ne 77 ]; then
  exit 77
fi
if [ "$rc" -ne "$status" ]; then
  echo "expect_output: exit status $rc, expected $status: $*"
  exit 1
fi
if ! PATTERN=$pattern perl -0777 -ne 'exit(/$ENV{PATTERN}/s ? 0 : 1)' "$out"; then
  echo "expect_output: exit status $rc as expected, but the output does not match: $pattern"
  exit 1
fi
echo "expect_output: exit status $rc and the output matches"
