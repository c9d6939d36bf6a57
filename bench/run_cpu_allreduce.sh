#!/usr/bin/env bash
# CPU all-reduce measurements on this machine: our mpi-ring against Open MPI's MPI_Allreduce
# (raw-mpi) on 2 and 4 ranks, and the simulated inter-node run over TCP. Writes the tables and
# JSON to bench/results/<date>_cpu/.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results/$(date -u +%F)_cpu
mkdir -p "$out"
flags=(--oversubscribe)
[[ $(id -u) -eq 0 ]] && flags+=(--allow-run-as-root)
bench=build/bin/dtrain-bench-allreduce
{
  echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(mpirun --version | head -1)"
  for np in 2 4; do
    for backend in raw-mpi mpi-ring; do
      mpirun "${flags[@]}" -np $np $bench -b 8 -e 64M -f 2 -w 5 --iters 20 --backend $backend --metrics-file "$out/allreduce_${backend}_np${np}.json"
    done
  done
  # Latency with dtrain's per-call consistency check on (its cost).
  mpirun "${flags[@]}" -np 2 $bench -b 8 -e 4K -f 8 -w 20 --iters 200 --backend mpi-ring --check-calls 1
  # Simulated inter-node: every byte over TCP (loopback), ranks as separate nodes.
  for backend in mpi-ring hierarchical; do
    mpirun "${flags[@]}" --mca btl tcp,self -x DTRAIN_RANKS_PER_NODE=1 -np 4 $bench -b 64K -e 64M -f 4 -w 3 --iters 10 \
      --backend $backend --metrics-file "$out/allreduce_tcp_${backend}_rpn1_np4.json"
  done
  mpirun "${flags[@]}" --mca btl tcp,self -x DTRAIN_RANKS_PER_NODE=2 -np 4 $bench -b 64K -e 64M -f 4 -w 3 --iters 10 \
    --backend hierarchical --metrics-file "$out/allreduce_tcp_hierarchical_rpn2_np4.json"
  mpirun "${flags[@]}" --mca btl tcp,self -np 4 $bench -b 64K -e 64M -f 4 -w 3 --iters 10 --backend raw-mpi \
    --metrics-file "$out/allreduce_tcp_raw-mpi_np4.json"
} 2>&1 | grep -v ' INFO ' | tee "$out/allreduce_tables.txt"
for json in "$out"/allreduce_*.json; do
  bench/plot_if_possible.sh "${json%.json}.png" "$json"
done
