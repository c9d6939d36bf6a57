#!/usr/bin/env bash
# Five interleaved rounds at 64 MiB on the simulated cluster (2 nodes x 2 ranks, 10 Gbit/s) with the
# VM otherwise idle: hierarchical (default 256 KiB ring segments), hierarchical with 4 MiB segments,
# and MPI_Allreduce (raw-mpi); the load before each run.
set -eu
cd "$(dirname "$0")/../../../.."
exec bench/run_sim_rounds.sh bench/results/2026-11-27_cpu/sim_10gbit_quiet 5 \
  hierarchical:hierarchical:DTRAIN_RING_SEGMENT_BYTES=262144 \
  hierarchical_seg4m:hierarchical:DTRAIN_RING_SEGMENT_BYTES=4194304 \
  raw-mpi:raw-mpi:DTRAIN_RING_SEGMENT_BYTES=262144
