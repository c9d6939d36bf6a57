#!/usr/bin/env bash
# Installs the Debian 12 packages dtrain builds and tests with. Fast when they are all present:
# it asks dpkg first and runs apt-get only for what is missing.
#   scripts/install_deps.sh          everything: build, demo and the whole test suite
#   scripts/install_deps.sh --demo   what scripts/demo.sh needs: build and Fashion-MNIST, without the
#                                    test suite's extras (clang-format-14, iproute2, the Slurm daemons)
set -euo pipefail

mode=all
case ${1:-} in
  "") ;;
  --demo) mode=demo ;;
  *) echo "usage: scripts/install_deps.sh [--demo]" >&2; exit 2 ;;
esac

packages=(
  cmake g++ make pkg-config
  openmpi-bin libopenmpi-dev
  protobuf-compiler libprotobuf-dev
  libboost-program-options-dev
  libgtest-dev
  libopenblas-dev
  libturbojpeg0-dev libjpeg62-turbo-dev
  zlib1g-dev
  clang-format-14                           # tests/style: the sources stay formatted
  python3-matplotlib                        # scripts/plot_metrics.py, bench/plot_bench.py (tests/plots)
  dataset-fashion-mnist
  iproute2                                  # cluster/sim: network namespaces, bridge, tc
  munge slurmctld slurmd slurm-client       # the real-Slurm test (tests/cluster/slurm_test.sh)
  python3-torch python3-mpi4py              # dtrain.torch's tests (tests/python), with /usr/bin/python3
)
# Only the test suite uses these (libgtest-dev stays: configuring the build needs it).
test_only=(clang-format-14 python3-matplotlib iproute2 munge slurmctld slurmd slurm-client python3-torch python3-mpi4py)

if [[ $mode == demo ]]; then
  demo=()
  for p in "${packages[@]}"; do
    [[ " ${test_only[*]} " == *" $p "* ]] || demo+=("$p")
  done
  packages=("${demo[@]}")
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "install_deps: missing packages: ${missing[*]}; run as root (or install them with apt-get)" >&2
  exit 1
fi
echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
