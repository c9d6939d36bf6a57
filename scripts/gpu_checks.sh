#!/bin/bash
# The GPU tests on a GPU machine without cmake/ctest (the lent device machines): run from the
# repository root with build/bin present (carried); logs under $OUT.
#   scripts/gpu_checks.sh [DATA_DIR]   # DATA_DIR: the Fashion-MNIST idx files (default Debian's)
set -u
OUT=${OUT:-/tmp/dtrain_gpu_checks}
DATA=${1:-/usr/share/datasets/fashion-mnist}
mkdir -p "$OUT"
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
GPUS=$(nvidia-smi -L | wc -l)
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
status=0
check() {  # check NAME COMMAND...
  local name=$1
  shift
  if timeout 600 "$@" > "$OUT/$name.log" 2>&1; then echo "PASS $name"; else echo "FAIL $name (rc $?)"; status=1; fi
}
for t in dtrain-models-gpu-tests dtrain-train-gpu-tests; do
  [ -x build/bin/$t ] && check "$t" build/bin/$t
done
if [ -x build/bin/dtrain-train-mpi-tests ] && [ "$GPUS" -ge 2 ]; then
  check rank_equivalence_np$GPUS $MPI -np "$GPUS" build/bin/dtrain-train-mpi-tests --gtest_filter='RankEquivalence.OnGpus*'
  grep -h "worst relative" "$OUT/rank_equivalence_np$GPUS.log"
fi
if [ -x build/bin/dtrain-train ]; then
  # e2e.fashion_mnist.gpu: the CPU run's config and global batch on one GPU, top-1 >= 88% at epoch 2.
  check fashion_mnist_gpu $MPI -np 1 build/bin/dtrain-train --config configs/fashion_mnist_resnet.pbtxt \
    --data_dir "$DATA" --device gpu --batch_per_rank 64 --log_every_steps 0
  grep -h "epoch .*top-1\|steps on" "$OUT/fashion_mnist_gpu.log"
  grep -q "epoch 2: .*top-1 \(8[89]\|9[0-9]\)\." "$OUT/fashion_mnist_gpu.log" || { echo "FAIL fashion_mnist_gpu accuracy"; status=1; }
fi
exit $status
