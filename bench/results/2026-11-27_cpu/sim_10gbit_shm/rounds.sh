#!/usr/bin/env bash
# Five interleaved rounds at 64 MiB on the simulated cluster (2 nodes x 2 ranks, 10 Gbit/s) with the
# VM otherwise idle: hierarchical with the defaults, hierarchical with DTRAIN_SHM_ALLREDUCE=0, and
# MPI_Allreduce (raw-mpi); the load before each run. (At 700df35 both hierarchical settings ran the
# same code: README.md says why.) $1: the folder for the JSON files (default this one).
set -eu
cd "$(dirname "$0")/../../../.."
exec bench/run_sim_rounds.sh "${1:-bench/results/2026-11-27_cpu/sim_10gbit_shm}" 5 \
  hierarchical:hierarchical:DTRAIN_SHM_ALLREDUCE=1 \
  hierarchical_ring_inside:hierarchical:DTRAIN_SHM_ALLREDUCE=0 \
  raw-mpi:raw-mpi:DTRAIN_SHM_ALLREDUCE=1
