#!/bin/bash
# Session 25 call 1 (x4): main ff92f67 (.device/payload_main.tar.xz) against branch bucket_lanes (.device/s25/lanes.tar.xz:
# staged buckets take two comm streams in turn). dtrain-bench-train 4x1 staged mpi-ring bf16 A/B interleaved, the lanes
# branch's GPU tests on the paths it changes, main's CUDA-graphs GPU tests (ff92f67 refactored them), fp32 A/B.
set -u; SECONDS=0; END=570
mkdir -p /tmp/m /tmp/l; tar xJf .device/payload_main.tar.xz -C /tmp/m; tar xJf .device/s25/lanes.tar.xz -C /tmp/l
{ nvidia-smi -L; lscpu | grep -i "model name\|^CPU(s)"; } > $OUT/machine.txt 2>&1
S=$OUT/summary.txt; T=/tmp/s25a; mkdir -p $T
SP=/opt/torch/.venv/lib/python3.12/site-packages
NV=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0 DTRAIN_MPI_DEVICE_POINTERS=stage DTRAIN_PLAN_CACHE=/tmp/plans DTRAIN_REQUIRE_GPU=1
MPI=(mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_MPI_DEVICE_POINTERS -x DTRAIN_PLAN_CACHE -x DTRAIN_REQUIRE_GPU)
bt() {  # bt NAME TREE NP RPN ARGS...   TREE: m (main) or l (lanes)
  local name=$1 tree=$2 np=$3 rpn=$4; shift 4
  [ $((SECONDS + 40)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  local lay=(); [ "$rpn" = - ] || lay=(-x DTRAIN_RANKS_PER_NODE=$rpn)
  LD_LIBRARY_PATH=/tmp/$tree/lib:$NV timeout -k 5 120 "${MPI[@]}" -np $np "${lay[@]}" /tmp/$tree/bin/dtrain-bench-train --precision bf16 \
    --batch-per-rank 256 --timing-warmup-steps 10 --steps 30 --world-sizes $np --metrics-file $T/$name.json "$@" > $T/$name.log 2>&1
  echo "$name rc $? $(awk -v n=$np '$1 == n && $2 ~ /^[0-9.]+$/ {print $2, "img/s/GPU"}' $T/$name.log | tail -1) $(grep -h 'ms (10th percentile' $T/$name.log | tail -1 | sed 's/.*step \([0-9. \/]*\) ms.*/p10\/p50\/p90 \1 ms/') secs $SECONDS" >> $S
}
ck() {  # ck NAME LIMIT TREE COMMAND...
  local name=$1 lim=$2 tree=$3; shift 3
  [ $((SECONDS + 30)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  LD_LIBRARY_PATH=/tmp/$tree/lib:$NV timeout -k 5 $lim "$@" > $T/$name.log 2>&1
  local rc=$?; echo "$([ $rc = 0 ] && echo PASS || echo FAIL) $name rc $rc secs $SECONDS" >> $S
}
bt warm_1gpu m 1 -
bt m_1gpu m 1 -
for r in 1 2 3; do
  bt m_4x1_bf16_r$r m 4 1 --backend mpi-ring --gradient-wire-dtype bf16
  bt l_4x1_bf16_r$r l 4 1 --backend mpi-ring --gradient-wire-dtype bf16
done
LT=/tmp/l/bin/tests; MT=/tmp/m/bin/tests
ck l_timeline_gpu_spans 150 l "${MPI[@]}" -np 2 $LT/dtrain-train-timeline-gpu-mpi-tests
ck l_staging_order 100 l "${MPI[@]}" -np 2 $LT/dtrain-comm-staging-gpu-mpi-tests
ck l_multinode_steps_mpi_ring 200 l "${MPI[@]}" -np 2 $LT/dtrain-multinode-gpu-mpi-tests --gtest_filter='*/MultiNodeTraining.*/mpi_ring'
ck l_multinode_fault_mpi_ring 200 l "${MPI[@]}" -np 2 $LT/dtrain-multinode-gpu-mpi-tests --gtest_filter='*/TrainingFaults.*/mpi_ring'
ck m_cuda_graphs_vs_eager 200 m $MT/dtrain-train-gpu-tests --gtest_filter='CudaGraphsGpuTest.*'
bt m_4x1_fp32 m 4 1 --backend mpi-ring --gradient-wire-dtype fp32
bt l_4x1_fp32 l 4 1 --backend mpi-ring --gradient-wire-dtype fp32
ck l_shape_4x1 200 l "${MPI[@]}" -np 4 -x DTRAIN_RANKS_PER_NODE=1 $LT/dtrain-multinode-shape-gpu-mpi-tests
grep -h "on the GPU:" $T/l_timeline_gpu_spans.log | head -3 >> $S
tar czf $OUT/logs.tgz -C /tmp s25a
cat $S
