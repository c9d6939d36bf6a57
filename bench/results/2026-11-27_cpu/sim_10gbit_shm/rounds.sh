#!/usr/bin/env bash
# Five interleaved rounds at 64 MiB on the simulated cluster (2 nodes x 2 ranks, 10 Gbit/s) with the
# VM otherwise idle: hierarchical with the defaults, hierarchical with DTRAIN_SHM_ALLREDUCE=0, and
# MPI_Allreduce (raw-mpi); the load before each run. (At 700df35 both hierarchical settings ran the
# same code: README.md says why.)
set -eu
cd "$(dirname "$0")/../../../.."
source cluster/sim/common.sh
out=${1:-bench/results/2026-11-27_cpu/sim_10gbit_shm}  # the folder for the JSON files
trap 'cluster/sim/down >/dev/null 2>&1 || true' EXIT
cluster/sim/down > /dev/null
cluster/sim/up 2 --slots 2 --rate 10gbit > /dev/null
source "$sim_state_dir/env"
run() {  # run NAME SHM BACKEND ROUND
  echo "## round $4 $1, load $(cut -d' ' -f1-3 /proc/loadavg)"
  DTRAIN_SHM_ALLREDUCE=$2 build/bin/dtrain-run -np 4 --hostfile "$sim_state_dir/hostfile" -x DTRAIN_SHM_ALLREDUCE -- \
    build/bin/dtrain-bench-allreduce -b 64M -e 64M -w 3 --iters 10 --backend "$3" \
    --metrics-file "$out/rounds_64m_$1_r$4.json" 2>&1 | grep -E "^ +67108864|shared"
}
for round in 1 2 3 4 5; do
  run hierarchical 1 hierarchical $round
  run hierarchical_ring_inside 0 hierarchical $round
  run raw-mpi 1 raw-mpi $round
done
