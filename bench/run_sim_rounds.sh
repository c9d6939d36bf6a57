#!/usr/bin/env bash
# Interleaved rounds of 64 MiB fp32 all-reduces on the simulated cluster (cluster/sim: 2 nodes x 2
# ranks, links shaped to 10 Gbit/s), so that a machine's changing load falls on every variant alike:
# each round runs every VARIANT once (NAME:BACKEND:VARIABLE=VALUE, the variable set on every rank),
# printing the load before it and its 64 MiB row; JSON to OUT/rounds_64m_NAME_rROUND.json. Needs root.
#   bench/run_sim_rounds.sh OUT ROUNDS VARIANT...
#   e.g. bench/run_sim_rounds.sh /tmp/r 5 hierarchical:hierarchical:DTRAIN_SHM_ALLREDUCE=1 raw-mpi:raw-mpi:DTRAIN_SHM_ALLREDUCE=1
set -eu
cd "$(dirname "$0")/.."
out=${1:?usage: bench/run_sim_rounds.sh OUT ROUNDS NAME:BACKEND:VARIABLE=VALUE...}
rounds=${2:?usage: bench/run_sim_rounds.sh OUT ROUNDS NAME:BACKEND:VARIABLE=VALUE...}
shift 2
(($#)) || { echo "bench/run_sim_rounds.sh: no VARIANT given" >&2; exit 2; }
source cluster/sim/common.sh
mkdir -p "$out"
trap 'cluster/sim/down >/dev/null 2>&1 || true' EXIT
cluster/sim/down > /dev/null
cluster/sim/up 2 --slots 2 --rate 10gbit > /dev/null
source "$sim_state_dir/env"
for round in $(seq "$rounds"); do
  for variant in "$@"; do
    IFS=: read -r name backend setting <<< "$variant"
    echo "## round $round $name, load $(cut -d' ' -f1-3 /proc/loadavg)"
    env "$setting" build/bin/dtrain-run -np 4 --hostfile "$sim_state_dir/hostfile" -x "${setting%%=*}" -- \
      build/bin/dtrain-bench-allreduce -b 64M -e 64M -w 3 --iters 10 --backend "$backend" \
      --metrics-file "$out/rounds_64m_${name}_r$round.json" 2>&1 | grep -E "^ +67108864|shared"
  done
done
