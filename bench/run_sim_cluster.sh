#!/usr/bin/env bash
# Flat ring against hierarchical across simulated nodes (cluster/sim): 2 nodes x 2 ranks, every
# node's link shaped with tc to each RATE given (default: 10gbit, then 1gbit), and once unshaped.
# Open MPI's own MPI_Allreduce (raw-mpi) is the peer in the same run. Needs root. Writes tables
# and JSON to bench/results/<date>_cpu/sim_<rate>/.
# Usage: bench/run_sim_cluster.sh [RATE...]
set -euo pipefail
cd "$(dirname "$0")/.."
rates=("$@")
((${#rates[@]})) || rates=(10gbit 1gbit unshaped)
bench=$PWD/build/bin/dtrain-bench-allreduce
source cluster/sim/common.sh
state=$sim_state_dir
trap 'cluster/sim/down >/dev/null 2>&1 || true' EXIT

for rate in "${rates[@]}"; do
  out=bench/results/$(date -u +%F)_cpu/sim_$rate
  mkdir -p "$out"
  cluster/sim/down >/dev/null
  if [[ $rate == unshaped ]]; then cluster/sim/up 2 --slots 2; else cluster/sim/up 2 --slots 2 --rate "$rate"; fi
  (
    source "$state/env"
    echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(mpirun --version | head -1)"
    echo "# cluster/sim/up 2 --slots 2 ${rate/unshaped/(no shaping)}: 2 nodes x 2 ranks, TCP between nodes, shared memory inside"
    for backend in mpi-ring hierarchical raw-mpi; do
      echo "## $backend"
      build/bin/dtrain-run -np 4 --hostfile "$state/hostfile" -- \
        "$bench" -b 1M -e 64M -f 4 -w 3 --iters 10 --backend "$backend" --metrics-file "$out/allreduce_${backend}_np4.json"
    done
  ) 2>&1 | grep -v ' INFO ' | tee "$out/allreduce_tables.txt"
  bench/plot_if_possible.sh "$out/allreduce_busbw.png" "$out"/allreduce_*_np4.json
done
