#!/bin/sh
# A stand-in rank for whole-job abort tests: rank $1 exits with status $2; every other rank sleeps
# 60 s, so a job that does not end on the failure is caught by the test's time limit.
# The failing rank exits once every other rank has started (at most 20 s), as a real rank fails
# after MPI_Init: failing while a peer's launcher wrapper is still starting tests a startup race
# (under load srun's SIGTERM could reach a wrapper before it installed its handlers, and the job
# ended 143 instead of 3), not the abort path.
# The rank comes from the launcher: Open MPI (OMPI_COMM_WORLD_RANK) or Slurm (SLURM_PROCID).
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${SLURM_PROCID:-}}}
size=${OMPI_COMM_WORLD_SIZE:-${SLURM_NTASKS:-1}}
started=${TMPDIR:-/tmp}/dtrain-fail-on-rank.${SLURM_JOB_ID:-${OMPI_MCA_ess_base_jobid:-none}}
mkdir -p "$started"
if [ "$rank" = "$1" ]; then
  waited=0
  while [ "$(ls "$started" | wc -l)" -lt $((size - 1)) ] && [ $waited -lt 200 ]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  rm -rf "$started"
  echo "rank $rank failing with exit $2" >&2
  exit "$2"
fi
touch "$started/$rank"
sleep 60
