#!/bin/sh
# Runs COMMAND with extra arguments that depend on the MPI rank, to give one rank input that
# differs from the others' (its data missing, say, as on one node of a cluster):
#   mpirun -np 2 rank_args.sh RANK "ARGS ON RANK" "ARGS ELSEWHERE" COMMAND [ARGS...]
# The extra arguments are split at spaces and appended after COMMAND's own.
rank=$1
on_rank=$2
elsewhere=$3
shift 3
me=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${SLURM_PROCID:-0}}}
if [ "$me" = "$rank" ]; then extra=$on_rank; else extra=$elsewhere; fi
# shellcheck disable=SC2086  # splitting the extra arguments is the point
exec "$@" $extra
