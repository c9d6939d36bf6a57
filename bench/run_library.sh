#!/usr/bin/env bash
# The C ABI's costs (dtrain-bench-library) against dtrain's own communicator (dtrain-bench-allreduce
# --backend auto: the Communicator the library's executor uses, made the same way) and Open MPI's
# MPI_Allreduce (--backend raw-mpi), on CPU ranks, in interleaved rounds so that a change in the
# machine's load hits every target alike. Builds nothing: give it the folder of the binaries.
#
#   bench/run_library.sh BIN_DIR OUT_DIR [ROUNDS]      (ROUNDS: 3 by default)
#
# Environment: RANKS ("2 4"), SIZES of the bandwidth curve ("1M,4M,16M,64M"; the communicator and
# MPI rows are every x4 from the first to the last), MPIRUN_FLAGS (added to mpirun's; mpirun's own
# binding by default: with --bind-to none two spinning ranks may share a core on a loaded host, and
# a call then takes a time slice, ~30 ms). CUDA_VISIBLE_DEVICES is emptied for every rank: CPU
# ranks even on a GPU machine.
# Writes OUT_DIR/{library,communicator,mpi}_np<N>_r<round>.json, tables.txt, machine.txt and
# summary.md (bench/summarize_library.py).
set -euo pipefail
if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 BIN_DIR OUT_DIR [ROUNDS]" >&2
  exit 2
fi
bin=$(cd "$1" && pwd)
out=$2
rounds=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
for tool in dtrain-bench-library dtrain-bench-allreduce; do
  [[ -x $bin/$tool ]] || { echo "$0: BIN_DIR '$1' has no executable $tool (build both targets first)" >&2; exit 2; }
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "$0: ROUNDS '$rounds' is not a positive integer" >&2; exit 2; }
mkdir -p "$out"
ranks=${RANKS:-"2 4"}
sizes=${SIZES:-1M,4M,16M,64M}
read -r -a extra <<<"${MPIRUN_FLAGS:-}"
flags=(--oversubscribe -x CUDA_VISIBLE_DEVICES= "${extra[@]}")
[[ $(id -u) -eq 0 ]] && flags+=(--allow-run-as-root)
export CUDA_VISIBLE_DEVICES=

{
  echo "date: $(date -u '+%F %T') UTC"
  echo "host: $(hostname), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "mpi: $(mpirun --version | head -1)"
  echo "mpirun flags: ${flags[*]}"
  echo "binaries: $bin"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out/machine.txt"

# Sizes for dtrain-bench-allreduce: the curve's smallest to largest, x4 per row, as SIZES.
first=${sizes%%,*}
last=${sizes##*,}
for ((round = 1; round <= rounds; ++round)); do
  for np in $ranks; do
    echo "## round $round, $np ranks, load $(cut -d' ' -f1 /proc/loadavg)"
    mpirun "${flags[@]}" -np "$np" "$bin/dtrain-bench-library" --sizes "$sizes" \
      --json "$out/library_np${np}_r${round}.json"
    mpirun "${flags[@]}" -np "$np" "$bin/dtrain-bench-allreduce" -b "$first" -e "$last" -f 4 -w 5 --iters 20 \
      --backend auto --metrics-file "$out/communicator_np${np}_r${round}.json"
    mpirun "${flags[@]}" -np "$np" "$bin/dtrain-bench-allreduce" -b "$first" -e "$last" -f 4 -w 5 --iters 20 \
      --backend raw-mpi --metrics-file "$out/mpi_np${np}_r${round}.json"
  done
done 2>&1 | grep -v ' INFO ' | tee "$out/tables.txt"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt"
/usr/bin/python3 "$here/summarize_library.py" "$out" | tee "$out/summary.md"
