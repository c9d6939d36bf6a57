#!/usr/bin/env bash
# Runs the commands of a markdown page (README.md or a page of docs/) as a user would type them,
# so that every command the documentation shows works: a reader who copies one must not meet a
# renamed flag or a moved file.
#
# The convention, in every page: every ```sh block has a marker in one of the two lines above its
# opening fence:
#   <!-- readme-test -->                 the block runs here, on a CPU-only machine, in seconds;
#   <!-- readme-test: not run: REASON --> it does not (a GPU, a cluster, root, minutes), and why.
# A ```sh block without a marker fails the test, so no command is added unclassified; so does a
# marker that is not within the two lines above a ```sh fence (it would silently run nothing).
# Every line of a runnable block is one command (a line ending in "\" continues on the next;
# "# ..." comments are the shell's). Each command runs with bash, on its own, from a scratch
# directory that holds the repository's top-level entries as symlinks and `build` as a link to
# the build directory, so `build/bin/...` and `configs/...` resolve as in a checkout; the blocks
# of one page share that directory, in page order (a later block may use a file an earlier one
# wrote). A command fails the test when its exit status is not 0 or it runs past the time limit
# (README_COMMAND_TIMEOUT, default 120 s). A page without runnable blocks passes, after its
# markers are checked.
#
# mpirun as root or with more ranks than cores: Open MPI refuses both unless told, so the test
# sets OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) (as root) and OMPI_MCA_rmaps_base_oversubscribe, the
# environment forms of --allow-run-as-root and --oversubscribe; the README says when to add them.
#
# Usage: readme_commands_test.sh PAGE.md SOURCE_DIR BUILD_DIR [--list]
#   --list: print the runnable commands and the skipped blocks, run nothing.
set -euo pipefail
readme=$1 src=$2 build=$3
list_only=false
[[ ${4:-} == --list ]] && list_only=true
timeout_s=${README_COMMAND_TIMEOUT:-120}

page=${readme#"${src%/}"/} # the path the messages name: relative to the checkout where it is inside
fail() { echo "FAIL: $page: $*"; exit 1; }
[[ -f $readme ]] || fail "no such file: $readme"
[[ -d $build/bin ]] || fail "no build directory with bin/ at $build"

# Parse: one record per command ("LINE<TAB>COMMAND") into $commands; skipped blocks into $skipped.
commands=()
skipped=()
unmarked=()
markers=() # line numbers of marker lines not yet attached to a ```sh fence
in_block=false runnable=false cmd="" cmd_line=0 n=0
prev1="" prev2=""
while IFS= read -r line || [[ -n $line ]]; do
  n=$((n + 1))
  if ! $in_block; then
    if [[ $line == "<!-- readme-test -->" || $line =~ ^\<!--\ readme-test: ]]; then
      markers+=("$n")
    fi
    if [[ $line =~ ^\`\`\`(sh|bash|shell)[[:space:]]*$ ]]; then
      in_block=true
      # The marker this fence takes: the last one within the two lines above it.
      if ((${#markers[@]} > 0)) && ((markers[-1] >= n - 2)); then unset 'markers[-1]'; fi
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
    [[ -z $cmd ]] || fail "line $cmd_line: a command ends in '\\' at the end of its block"
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
$in_block && fail "a code block is not closed"
((${#unmarked[@]} == 0)) ||
  fail "\`\`\`sh block(s) at line(s) ${unmarked[*]} have no <!-- readme-test --> or" \
    "<!-- readme-test: not run: REASON --> marker in the two lines above them"
((${#markers[@]} == 0)) ||
  fail "readme-test marker(s) at line(s) ${markers[*]} are not within the two lines above a" \
    "\`\`\`sh fence, so they mark nothing"

if $list_only; then
  ((${#commands[@]} == 0)) || printf '%s\n' "${commands[@]}"
  ((${#skipped[@]} == 0)) || printf 'skipped: %s\n' "${skipped[@]}"
  exit 0
fi
if ((${#commands[@]} == 0)); then
  echo "PASS: $page: no runnable command, ${#skipped[@]} block(s) not run"
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
  echo "=== $page line $line: $command"
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
((failed == 0)) || fail "$failed of ${#commands[@]} command(s) failed"
echo "PASS: $page: ${#commands[@]} command(s) ran"
