#!/bin/bash
# The GPU tests on a GPU machine without cmake/ctest (the lent device machines): run from the
# repository root with the binaries in $BIN (default build/bin, carried); logs under $OUT. The test
# binaries are taken from $BIN/tests where it exists (a build tree), else from $BIN (carried flat).
#   scripts/gpu_checks.sh [DATA_DIR]   # DATA_DIR: the Fashion-MNIST idx files (default Debian's)
set -u
OUT=${OUT:-/tmp/dtrain_gpu_checks}
BIN=${BIN:-build/bin}
TESTS=$BIN/tests
[ -d "$TESTS" ] || TESTS=$BIN
DATA=${1:-/usr/share/datasets/fashion-mnist}
mkdir -p "$OUT"
SP=/opt/torch/.venv/lib/python3.12/site-packages
# libdtrain.so: build/lib beside build/bin in a build tree, or beside the binaries carried flat.
LIBDTRAIN=$(cd "$BIN/../lib" 2> /dev/null && pwd):$(cd "$BIN" && pwd)
export LD_LIBRARY_PATH=$LIBDTRAIN:$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
# On a GPU machine a test skipped for want of a GPU is a failure (a driver too old for the toolkit
# must not pass the GPU suites by skipping them); a suite whose tests all skipped for another
# reason (too few ranks) exits 77 and shows as SKIP.
export DTRAIN_REQUIRE_GPU=1
# Convolution plans measured by these checks stay in this run's folder: the checks neither read a
# user's ~/.cache/dtrain nor depend on what an earlier run left there.
export DTRAIN_PLAN_CACHE=$OUT/plan_cache
GPUS=$(nvidia-smi -L | wc -l)
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_REQUIRE_GPU -x DTRAIN_PLAN_CACHE"
status=0
check() {  # check NAME COMMAND...
  check_within 600 "$@"
}
check_within() {  # check_within SECONDS NAME COMMAND...: a command still running then is a hang, and fails
  local limit=$1 name=$2
  shift 2
  timeout -k 10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then
    echo "PASS $name"
  elif [ $rc -eq 77 ]; then
    echo "SKIP $name (every test skipped; see $OUT/$name.log)"
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ] || grep -q WATCHDOG "$OUT/$name.log"; then
    echo "FAIL $name (hung: killed after $limit s or by its watchdog)"; status=1
  else
    echo "FAIL $name (rc $rc)"; status=1
  fi
}
# Synchronized batch norm on GPUs, 2 ranks (sharing the GPU when there is one):
# the engine test (2 ranks x batch 4 in one BN group against 1 rank x batch 8, gradients over
# mpi-ring staged through the host), then dtrain-train itself as 2 simulated nodes (sharing the GPU
# when there is one: --allow-gpu-sharing).
if [ -x $TESTS/dtrain-train-mpi-tests ]; then
  check_within 300 sync_batch_norm_gpu_np2 $MPI -np 2 -x DTRAIN_MPI_DEVICE_POINTERS=stage \
    $TESTS/dtrain-train-mpi-tests --gtest_filter='SyncBatchNorm.OnGpus*'
  grep -h "worst relative" "$OUT/sync_batch_norm_gpu_np2.log"
fi
if [ -x $BIN/dtrain-train ]; then
  check_within 300 sync_batch_norm_train_np2 $MPI -np 2 -x DTRAIN_MPI_DEVICE_POINTERS=stage -x DTRAIN_RANKS_PER_NODE=1 \
    $BIN/dtrain-train --device gpu --backend mpi-ring --allow-gpu-sharing --bn-sync-group 2 --model small-resnet --blocks_per_stage 1,1 \
    --width 8 --image_size 16 --synthetic_samples 256 --batch_per_rank 8 --epochs 1 --log_every_steps 8
  grep -h "synchronized batch norm\|steps on\|epoch 0:\|communicator:" "$OUT/sync_batch_norm_train_np2.log"
  grep -q "steps on GPU .*BN synchronized over groups of 2 ranks" "$OUT/sync_batch_norm_train_np2.log" ||
    { echo "FAIL sync_batch_norm_train_np2: the engine did not report synchronized BN"; status=1; }
  # gradient_wire_dtype auto: GPUs across 2 (simulated) nodes on mpi-ring take the bf16 wire.
  grep -q "cross-node wire bf16 (auto: GPUs across 2 nodes" "$OUT/sync_batch_norm_train_np2.log" ||
    { echo "FAIL sync_batch_norm_train_np2: auto did not pick the bf16 cross-node wire"; status=1; }
fi
# TensorBoard's own reader (installed here, not in CI) loads dtrain-train's event files.
if [ -x $BIN/dtrain-train ] && /opt/torch/.venv/bin/python -c "import tensorboard" 2> /dev/null; then
  rm -rf "$OUT/tensorboard"
  check tensorboard_events bash -c "$MPI -np 2 $BIN/dtrain-train --model small-resnet --blocks_per_stage 1,1 --width 4 \
    --image_size 16 --synthetic_samples 64 --batch_per_rank 8 --epochs 2 --log_every_steps 2 --loader_threads 1 \
    --device cpu --run-dir $OUT/tensorboard/run --tensorboard-dir $OUT/tensorboard/events &&
    /opt/torch/.venv/bin/python scripts/check_tensorboard_events.py $OUT/tensorboard/events 2,4,6,8"
  grep -h "tags:\|config text\|PASS\|FAIL" "$OUT/tensorboard_events.log"
fi
# dtrain-export's file loads into torchvision's ResNet-50 with the same eval
# logits, a torchvision file gives dtrain the same logits, and --init-weights with a frozen backbone
# on the GPU leaves the backbone bit for bit (scripts/check_torchvision_weights.py).
if [ -x $BIN/dtrain-export ] && [ -x $TESTS/dtrain-eval-logits ] && [ -x $BIN/dtrain-train ]; then
  rm -rf "$OUT/torchvision"
  check torchvision_weights /opt/torch/.venv/bin/python scripts/check_torchvision_weights.py $BIN $TESTS \
    "$OUT/torchvision" "$MPI"
  grep -h "^PASS\|^FAIL\|: logits (" "$OUT/torchvision_weights.log"
fi
# The timeline on GPUs. The step's spans from CUDA events on their streams, every
# bucket's all-reduce on the comm stream inside the step as the GPU ran it (2 ranks, sharing one
# GPU on the staged mpi-ring where there is only one); then dtrain-train's file, one rank per GPU
# (1 or 2), checked by scripts/check_timeline.py (python's json module; needs no packages).
PY=$(command -v python3 || echo /opt/torch/.venv/bin/python)
if [ -x $TESTS/dtrain-train-timeline-gpu-mpi-tests ]; then
  check_within 240 timeline_gpu_spans $MPI -np 2 -x DTRAIN_MPI_DEVICE_POINTERS=stage \
    $TESTS/dtrain-train-timeline-gpu-mpi-tests
  grep -h "on the GPU:" "$OUT/timeline_gpu_spans.log"
fi
if [ -x $BIN/dtrain-train ]; then
  rm -rf "$OUT/timeline"
  NP=$((GPUS >= 2 ? 2 : 1))
  check timeline_gpu bash -c "$MPI -np $NP $BIN/dtrain-train --model small-resnet --blocks_per_stage 1,1,1 \
    --width 48 --image_size 32 --synthetic_samples 1024 --batch_per_rank 32 --epochs 1 --max-total-steps 14 \
    --max-validation-batches 1 --log_every_steps 0 --loader_threads 2 --bucket-mib 1 --device gpu \
    --checkpoint-dir $OUT/timeline/ckpt --checkpoint-every-steps 11 --timeline $OUT/timeline/trace.json &&
    $PY scripts/check_timeline.py $OUT/timeline/trace.json --ranks $NP --steps 10:12 --device gpu --checkpoint-step 11"
  grep -h "timeline of steps\|^rank .* step\|PASS\|FAIL" "$OUT/timeline_gpu.log"
fi
# dtrain.torch on CUDA tensors (PyTorch of /opt/torch/.venv, libdtrain.so of this build: $DTRAIN_LIBRARY
# or $BIN/../lib): the collectives, DistributedOptimizer and bad input on every GPU, one rank each,
# and on 1 GPU; the Horovod-style examples on the GPUs.
TORCH_PY=/opt/torch/.venv/bin/python
DTRAIN_LIBRARY=${DTRAIN_LIBRARY:-$(ls $BIN/../lib/libdtrain.so.1 $BIN/libdtrain.so.1 2> /dev/null | head -1)}
if [ -x $TORCH_PY ] && [ -n "$DTRAIN_LIBRARY" ]; then
  export DTRAIN_LIBRARY PYTHONPATH=$PWD/python:$PWD/tests/python PYTHONDONTWRITEBYTECODE=1 DTRAIN_TEST_DEVICE=cuda
  PYMPI="$MPI -x DTRAIN_LIBRARY -x PYTHONPATH -x PYTHONDONTWRITEBYTECODE -x DTRAIN_TEST_DEVICE"
  for np in 1 $GPUS; do
    check python_collectives_cuda_np$np $PYMPI -np $np $TORCH_PY tests/python/collectives_test.py
    check python_optimizer_cuda_np$np $PYMPI -np $np $TORCH_PY tests/python/optimizer_test.py
    check python_memory_format_cuda_np$np $PYMPI -np $np $TORCH_PY tests/python/memory_format_test.py
  done
  [ "$GPUS" -ge 2 ] && check python_init_comm_np$GPUS $PYMPI -np $GPUS $TORCH_PY tests/python/init_comm_test.py
  check python_errors_cuda_np$GPUS $PYMPI -np $GPUS $TORCH_PY tests/python/errors_test.py
  check python_mnist_cuda_np$GPUS $PYMPI -np $GPUS $TORCH_PY examples/torch/mnist.py --epochs 3 --lr 0.025 \
    --momentum 0.9 --batch-size 32 --fp16-allreduce --use-mixed-precision --min-accuracy 0.9
  check python_imagenet_cuda_np$GPUS bash -c "cd $OUT && $PYMPI -np $GPUS $TORCH_PY $PWD/examples/torch/imagenet_resnet.py \
    --arch resnet18 --epochs 2 --batches-per-allreduce 2 --batch-size 16 --warmup-epochs 1 --base-lr 0.0125 \
    --synthetic-samples 512 --fp16-allreduce --max-loss-ratio 0.6 --checkpoint-format $OUT/imagenet-{epoch}.pth.tar"
else
  echo "SKIP python_* (no $TORCH_PY, or no libdtrain.so.1 in $BIN/../lib: set DTRAIN_LIBRARY)"
fi
exit $status
