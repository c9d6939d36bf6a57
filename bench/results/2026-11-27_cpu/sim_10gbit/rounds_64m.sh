#!/usr/bin/env bash
# Three interleaved rounds of hierarchical and MPI_Allreduce (raw-mpi) at 64 MiB on the simulated
# cluster (2 nodes x 2 ranks, 10 Gbit/s), after bench/run_sim_cluster.sh 10gbit; the load before each run.
set -eu
cd "$(dirname "$0")/../../../.."
source cluster/sim/common.sh
out=bench/results/2026-11-27_cpu/sim_10gbit
trap 'cluster/sim/down >/dev/null 2>&1 || true' EXIT
cluster/sim/down > /dev/null
cluster/sim/up 2 --slots 2 --rate 10gbit > /dev/null
source "$sim_state_dir/env"
for round in 1 2 3; do
  for backend in hierarchical raw-mpi; do
    echo "## round $round $backend, load $(cut -d' ' -f1-3 /proc/loadavg)"
    build/bin/dtrain-run -np 4 --hostfile "$sim_state_dir/hostfile" -- build/bin/dtrain-bench-allreduce \
      -b 64M -e 64M -w 3 --iters 10 --backend $backend --metrics-file "$out/rounds_64m_${backend}_r$round.json" 2>&1 |
      grep -E "^ +67108864"
  done
done
