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
# The checks run the default step (CUDA graphs where they apply) unless a check sets it.
unset DTRAIN_CUDA_GRAPHS
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
# Three times over: stale reads after host copies showed only in some trials.
for t in dtrain-models-gpu-tests dtrain-train-gpu-tests dtrain-jpeg-gpu-tests; do
  [ -x $TESTS/$t ] && check "$t" $TESTS/$t --gtest_repeat=3
done
# CUDA graphs (the default): the replayed step against the eager step on a small bf16
# ResNet (losses, a partial-batch evaluation midway, final parameters), on its own for a clear name.
[ -x $TESTS/dtrain-train-gpu-tests ] &&
  check cuda_graphs_vs_eager $TESTS/dtrain-train-gpu-tests --gtest_filter='CudaGraphsGpuTest.*' --gtest_repeat=3
# The same over NCCL, 2 ranks on 2 GPUs: graphs cut at each bucket's all-reduce (eager between them).
if [ -x $TESTS/dtrain-train-mpi-tests ] && [ "$GPUS" -ge 2 ]; then
  check cuda_graphs_nccl_np2 $MPI -np 2 $TESTS/dtrain-train-mpi-tests --gtest_filter='CudaGraphsNccl.*'
  grep -h "graphs vs eager" "$OUT/cuda_graphs_nccl_np2.log"
fi
if [ -x $TESTS/dtrain-train-mpi-tests ] && [ "$GPUS" -ge 2 ]; then
  check rank_equivalence_np$GPUS $MPI -np "$GPUS" $TESTS/dtrain-train-mpi-tests --gtest_filter='RankEquivalence.OnGpus*'
  grep -h "worst relative" "$OUT/rank_equivalence_np$GPUS.log"
fi
# Gradient accumulation through the Trainer on GPUs, K micro-batches of B against
# batch K x B (fp32, TF32 off, BN-free): 1 rank, then 2 ranks (NCCL with 2 GPUs; with 1 GPU both
# ranks share it as 2 simulated nodes over the staged mpi-ring). Then a bf16 run of dtrain-train
# with --accumulation-steps 3 whose progress line counts optimizer steps and every image.
if [ -x $TESTS/dtrain-train-mpi-tests ]; then
  for np in 1 2; do
    check accumulation_gpu_np$np $MPI -np $np -x DTRAIN_MPI_DEVICE_POINTERS=stage $TESTS/dtrain-train-mpi-tests \
      --gtest_filter='GradientAccumulation.OnGpus*'
  done
  grep -h "worst relative" "$OUT"/accumulation_gpu_np*.log
fi
if [ -x $BIN/dtrain-train ]; then
  check accumulation_train_bf16 $MPI -np 1 $BIN/dtrain-train --device gpu --model small-resnet --blocks_per_stage 1,1 \
    --width 8 --image_size 16 --synthetic_samples 600 --batch_per_rank 8 --accumulation-steps 3 --epochs 1 \
    --log_every_steps 5 --loader_threads 2
  grep -h "global batch\|epoch 0" "$OUT/accumulation_train_bf16.log"
  grep -q "batch per rank 8 x 3 accumulated micro-batches, global batch 24" "$OUT/accumulation_train_bf16.log" &&
    grep -Eq "epoch 0 step 25/25 loss [0-9.]+ " "$OUT/accumulation_train_bf16.log" ||
    { echo "FAIL accumulation_train_bf16: no 25 optimizer steps of global batch 24"; status=1; }
fi
# The multi-node GPU path, 2 ranks as 2 simulated nodes (DTRAIN_RANKS_PER_NODE=1), with
# the cross-node ring staged through the host. Each training test in a process of its own (lazy
# kernel loading, which the hang needed, happens once per process) and under a time limit. On a
# one-GPU machine the two simulated nodes share the GPU (hierarchical and staged mpi-ring never use
# NCCL between nodes); nccl needs a GPU per rank and runs from 2 GPUs on.
# Staged device calls hand the worker each call before a stream waits for it (2 ranks may share a GPU).
if [ -x $TESTS/dtrain-comm-staging-gpu-mpi-tests ] && [ "$GPUS" -ge 1 ]; then
  check_within 120 comm_staging_order_np2 $MPI -np 2 $TESTS/dtrain-comm-staging-gpu-mpi-tests
fi
if [ -x $TESTS/dtrain-multinode-gpu-mpi-tests ] && [ "$GPUS" -ge 1 ]; then
  MN="$MPI -np 2 -x DTRAIN_MPI_DEVICE_POINTERS=stage"
  for b in hierarchical mpi_ring; do
    check_within 240 multinode_train_steps_$b $MN $TESTS/dtrain-multinode-gpu-mpi-tests --gtest_filter="*/MultiNodeTraining.*/$b"
    check_within 240 multinode_train_fault_$b $MN $TESTS/dtrain-multinode-gpu-mpi-tests --gtest_filter="*/TrainingFaults.*/$b"
  done
  filter='*/RankEquivalenceOnBackends.*'
  [ "$GPUS" -ge 2 ] || filter='*/RankEquivalenceOnBackends.*:-*/RankEquivalenceOnBackends.*/nccl'
  check_within 300 rank_equivalence_backends $MN $TESTS/dtrain-multinode-gpu-mpi-tests --gtest_filter="$filter"
  check_within 300 cross_node_wire $MN $TESTS/dtrain-multinode-gpu-mpi-tests --gtest_filter='*/CrossNodeWireTraining.*'
  grep -hs "simulated nodes, \|worst relative" "$OUT"/multinode_train_steps_*.log "$OUT/rank_equivalence_backends.log" \
    "$OUT/cross_node_wire.log"
fi
# Rank equivalence at the real multi-node shape, 4 ranks on 4 GPUs (one each, by local rank) against
# 1 GPU with 4x the batch: 2 simulated nodes x 2 GPUs (hierarchical: NCCL inside each node, the
# staged host ring across) and 4 x 1 (hierarchical and staged mpi-ring), fp32 and bf16 wire. Each
# layout in a process of its own; about 1 min each.
if [ -x $TESTS/dtrain-multinode-shape-gpu-mpi-tests ] && [ "$GPUS" -ge 4 ]; then
  SHAPE="$MPI -np 4 -x DTRAIN_MPI_DEVICE_POINTERS=stage"
  T=$TESTS/dtrain-multinode-shape-gpu-mpi-tests
  check_within 300 multinode_shape_2x2 $SHAPE -x DTRAIN_RANKS_PER_NODE=2 $T \
    --gtest_filter='*/NodeShapeEquivalence.*/hierarchical_*'
  check_within 300 multinode_shape_4x1 $SHAPE -x DTRAIN_RANKS_PER_NODE=1 $T
  grep -hs " wire, \| refused: " "$OUT"/multinode_shape_2x2.log "$OUT"/multinode_shape_4x1.log
fi
if [ -x $TESTS/dtrain-comm-robustness-mpi-tests ] && [ "$GPUS" -ge 2 ]; then
  check_within 240 comm_robustness_np2 $MPI -np 2 $TESTS/dtrain-comm-robustness-mpi-tests
  check_within 300 comm_gpu_collectives_np2 $MPI -np 2 $TESTS/dtrain-comm-gpu-mpi-tests
fi
# libdtrain.so's C ABI on device buffers (DTRAIN_CUDA): every collective, dtype and awkward count
# against exact references, the stream rules (dtrain_wait_stream), wrong memory; one rank per GPU
# on 1, 2 and 4 GPUs where there are that many (NCCL), then 2 ranks as 2 simulated nodes: the
# hierarchical backend (DTRAIN_GPU_BACKEND: NCCL inside each node, the staged ring across) and auto
# (one rank a node: the flat staged mpi-ring).
if [ -x $TESTS/dtrain-library-device-test ]; then
  for np in 1 2 4; do
    [ "$GPUS" -ge $np ] && check library_device_np$np $MPI -np $np $TESTS/dtrain-library-device-test
  done
  if [ "$GPUS" -ge 2 ]; then
    TWO_NODES="$MPI -np 2 -x DTRAIN_RANKS_PER_NODE=1 -x DTRAIN_MPI_DEVICE_POINTERS=stage"
    check library_device_hierarchical_np2 $TWO_NODES -x DTRAIN_GPU_BACKEND=hierarchical $TESTS/dtrain-library-device-test
    check library_device_auto_2x1_np2 $TWO_NODES $TESTS/dtrain-library-device-test
    grep -q "communicator: mpi-ring (auto: 2 ranks on 2 nodes of 1" "$OUT/library_device_auto_2x1_np2.log" ||
      { echo "FAIL library_device_auto_2x1_np2: auto did not take the flat ring at one GPU a node"; status=1; }
    # A failed cross-node step fails the wait of its own collective on every rank (the background
    # thread does not wait for the cross-node steps), and the collectives after it are exact: the
    # third collective, waited by dtrain_wait_stream, then the fourth, waited by dtrain_wait.
    for k in 3 4; do
      check library_device_fault${k}_np2 $TWO_NODES -x DTRAIN_GPU_BACKEND=hierarchical -x DTRAIN_FAULT_INJECT=$k \
        $TESTS/dtrain-library-device-test --gtest_filter='DeviceFaults.*'
    done
  fi
  grep -h "^seed\|communicator:" "$OUT"/library_device_*.log
fi
if [ -x $BIN/dtrain-train ]; then
  # e2e.fashion_mnist.gpu: the CPU run's config and global batch on one GPU, top-1 >= 88% at epoch 2,
  # with the step replayed from CUDA graphs (the default): the log says the step was captured (each
  # epoch's evaluation drops the graphs; captured again).
  check fashion_mnist_gpu $MPI -np 1 $BIN/dtrain-train --config configs/fashion_mnist_resnet.pbtxt \
    --data_dir "$DATA" --device gpu --batch_per_rank 64 --log_every_steps 400
  grep -h "epoch .*top-1\|steps on\|GPU memory\|summary:\|CUDA graphs" "$OUT/fashion_mnist_gpu.log"
  grep -q "epoch 2: .*top-1 \(8[89]\|9[0-9]\)\." "$OUT/fashion_mnist_gpu.log" || { echo "FAIL fashion_mnist_gpu accuracy"; status=1; }
  grep -q "CUDA graphs: the step is captured" "$OUT/fashion_mnist_gpu.log" ||
    { echo "FAIL fashion_mnist_gpu: the step was never captured"; status=1; }
  # The progress line gives the GPU memory (the caching allocator's peak and reserved).
  grep -Eq "epoch 0 step 400/[0-9]+ .*, GPU memory [0-9.]+ GiB peak, [0-9.]+ GiB reserved" "$OUT/fashion_mnist_gpu.log" ||
    { echo "FAIL fashion_mnist_gpu: no GPU memory in the progress line"; status=1; }
  # The same run with the eager step (DTRAIN_CUDA_GRAPHS=0): the same accuracy, and no capture.
  check fashion_mnist_gpu_eager $MPI -np 1 -x DTRAIN_CUDA_GRAPHS=0 $BIN/dtrain-train \
    --config configs/fashion_mnist_resnet.pbtxt --data_dir "$DATA" --device gpu --batch_per_rank 64 --log_every_steps 400
  grep -h "epoch .*top-1\|CUDA graphs" "$OUT/fashion_mnist_gpu_eager.log"
  grep -q "epoch 2: .*top-1 \(8[89]\|9[0-9]\)\." "$OUT/fashion_mnist_gpu_eager.log" ||
    { echo "FAIL fashion_mnist_gpu_eager accuracy"; status=1; }
  ! grep -q "CUDA graphs: the step is captured" "$OUT/fashion_mnist_gpu_eager.log" ||
    { echo "FAIL fashion_mnist_gpu_eager: the step was captured with DTRAIN_CUDA_GRAPHS=0"; status=1; }
fi
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
