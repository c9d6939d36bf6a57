#!/bin/bash
# Runs the command when this machine has an NVIDIA GPU; otherwise says why and exits 77, which the
# GPU tests register as ctest's SKIP_RETURN_CODE.
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L 2> /dev/null | grep -q '^GPU '; then
  echo "skipped: no NVIDIA GPU on $(hostname) (nvidia-smi lists none)"
  exit 77
fi
exec "$@"
