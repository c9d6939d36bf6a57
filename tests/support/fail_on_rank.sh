#!/bin/sh
# A stand-in rank for whole-job abort tests: rank $1 exits with status $2 at once; every other rank
# sleeps 60 s, so a job that does not end on the failure is caught by the test's time limit.
# The rank comes from the launcher: Open MPI (OMPI_COMM_WORLD_RANK) or Slurm (SLURM_PROCID).
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${SLURM_PROCID:-}}}
if [ "$rank" = "$1" ]; then
  echo "rank $rank failing with exit $2" >&2
  exit "$2"
fi
sleep 60
