#!/usr/bin/env bash
# Runs the README's commands as a user would type them (issue 16: every command shown works).
#
# The convention, in README.md: every ```sh block has a marker in one of the two lines above its
# opening fence:
#   <!-- readme-test -->                 the block runs here, on a CPU-only machine, in seconds;
#   <!-- readme-test: not run: REASON --> it does not (a GPU, a cluster, root, minutes), and why.
# A ```sh block without a marker fails the test, so no command is added unclassified. Every line
# of a runnable block is one command (a line ending in "\" continues on the next; "# ..." comments
# are the shell's). Each command runs with bash, on its own, from a scratch directory that holds
# the repository's top-level entries as symlinks and `build` as a link to the build directory, so
# `build/bin/...` and `configs/...` resolve as in a checkout. A command fails the test when its
# exit status is not 0 or it runs past the time limit (README_COMMAND_TIMEOUT, default 120 s).
#
# mpirun as root or with more ranks than cores: Open MPI refuses both unless told, so the test
# sets OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) (as root) and OMPI_MCA_rmaps_base_oversubscribe, the
# environment forms of --allow-run-as-root and --oversubscribe; the README says when to add them.
#
# Usage: readme_commands_test.sh README SOURCE_DIR BUILD_DIR [--list]
#   --list: print the runnable commands and the skipped blocks, run nothing.
set -euo pipefail
readme=$1 src=$2 build=$3
list_only=false
[[ ${4:-} == --list ]] && list_only=true
timeout_s=${README_COMMAND_TIMEOUT:-120}

fail() { echo "FAIL: $*"; exit 1; }
[[ -f $readme ]] || fail "no README at $readme"
[[ -d $build/bin ]] || fail "no build directory with bin/ at $build"

# Parse: one record per command ("LINE<TAB>COMMAND") into $commands; skipped blocks into $skipped.
commands=()
skipped=()
unmarked=()
in_block=false runnable=false cmd="" cmd_line=0 n=0
prev1="" prev2=""
while IFS= read -r line || [[ -n $line ]]; do
  n=$((n + 1))
  if ! $in_block; then
    if [[ $line =~ ^\`\`\`(sh|bash|shell)[[:space:]]*$ ]]; then
      in_block=true
      if [[ $prev1 == "<!-- readme-test -->" || $prev2 == "<!-- readme-test -->" ]]; then
        runnable=true
      elif [[ $prev1 =~ ^\<!--\ readme-test:\ not\ run:\ .+--\>$ || $prev2 =~ ^\<!--\ readme-test:\ not\ run:\ .+--\>$ ]]; then
        runnable=false
        skipped+=("line $n: $([[ $prev1 == "<!-- readme-test:"* ]] && echo "$prev1" || echo "$prev2")")
      else
        runnable=false
        unmarked+=("$n")
      fi
    fi
    prev2=$prev1 prev1=$line
    continue
  fi
  if [[ $line =~ ^\`\`\`[[:space:]]*$ ]]; then
    [[ -z $cmd ]] || fail "README line $cmd_line: a command ends in '\\' at the end of its block"
    in_block=false prev1="" prev2=""
    continue
  fi
  $runnable || continue
  if [[ -z $cmd ]]; then
    [[ $line =~ ^[[:space:]]*$ ]] && continue
    cmd_line=$n
  fi
  if [[ $line == *\\ ]]; then
    cmd+="${line%\\} "
  else
    cmd+=$line
    commands+=("$cmd_line"$'\t'"$cmd")
    cmd=""
  fi
done <"$readme"
$in_block && fail "README: a code block is not closed"
((${#unmarked[@]} == 0)) ||
  fail "README: \`\`\`sh block(s) at line(s) ${unmarked[*]} have no <!-- readme-test --> or" \
    "<!-- readme-test: not run: REASON --> marker in the two lines above them"
((${#commands[@]} > 0)) || fail "README: no runnable command found"

if $list_only; then
  printf '%s\n' "${commands[@]}"
  ((${#skipped[@]} == 0)) || printf 'skipped: %s\n' "${skipped[@]}"
  exit 0
fi

# The scratch checkout: the repository's top-level entries as links, build -> the build directory.
work=$(mktemp -d /tmp/dtrain-readme.XXXXXX)
trap 'rm -rf "$work"' EXIT
for entry in "$src"/* "$src"/.[!.]*; do
  [[ -e $entry ]] || continue
  name=${entry##*/}
  [[ $name == build || $name == build-* || $name == .git ]] && continue
  ln -s "$entry" "$work/$name"
done
ln -s "$(cd "$build" && pwd)" "$work/build"

export OMPI_MCA_rmaps_base_oversubscribe=1
if [[ $(id -u) -eq 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

echo "${#commands[@]} runnable command(s), ${#skipped[@]} block(s) not run"
((${#skipped[@]} == 0)) || printf '  %s\n' "${skipped[@]}"
failed=0
for record in "${commands[@]}"; do
  line=${record%%$'\t'*}
  command=${record#*$'\t'}
  echo "=== README line $line: $command"
  start=$SECONDS
  status=0
  (cd "$work" && timeout --kill-after=10 "$timeout_s" bash -c "set -o pipefail; $command") >"$work/.out" 2>&1 ||
    status=$?
  elapsed=$((SECONDS - start))
  if ((status == 0)); then
    tail -n 5 "$work/.out" | sed 's/^/    /'
    echo "--- ok (${elapsed} s)"
  else
    sed 's/^/    /' "$work/.out" | tail -n 40
    if ((status == 124 || status == 137)); then
      echo "--- FAILED: ran past ${timeout_s} s"
    else
      echo "--- FAILED: exit status $status (${elapsed} s)"
    fi
    failed=$((failed + 1))
  fi
done
((failed == 0)) || fail "$failed of ${#commands[@]} README command(s) failed"
echo "PASS: ${#commands[@]} README command(s) ran"
