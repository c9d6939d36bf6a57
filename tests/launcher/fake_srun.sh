#!/bin/sh
# A stand-in for Slurm's srun in dtrain-run's tests (installed as "srun" on the test's PATH):
# `srun --mpi=list` names pmix, as a Slurm with PMIx does; any other call prints its arguments, one
# per line ("arg: ..."), and the value it got of each variable named in --export=ALL,NAME,...
# ("env: NAME=value"), then exits 0 without starting anything.
if [ "$1" = "--mpi=list" ]; then
  printf 'MPI plugin types are...\n\tnone\n\tpmix\n'
  exit 0
fi
for arg in "$@"; do
  printf 'arg: %s\n' "$arg"
  case "$arg" in
    --export=ALL,*)
      for name in $(printf '%s' "${arg#--export=ALL,}" | tr ',' ' '); do
        eval "printf 'env: %s=%s\n' \"\$name\" \"\${$name-<unset>}\""
      done
      ;;
  esac
done
