#!/bin/bash
# Session 25 call 6 (x4): branch ring_lanes_default a1b20c2 (.device/payload_new.tar.xz: two host-ring lanes by default).
# GPU tests of the paths the lanes take (staged cross-node rings: multi-node training, faults, rank equivalence at 2x2
# and 4x1, the wire, the staged device collectives, the timeline); then dtrain-bench-train 4x1 staged mpi-ring bf16 with
# the default (2 lanes) against DTRAIN_RING_LANES=1, interleaved, 1 GPU, 2x2; dtrain-train synthetic 4x1 bf16 and 2x2.
set -u; SECONDS=0; END=${END:-420}
mkdir -p /tmp/n; tar xJf .device/payload_new.tar.xz -C /tmp/n
{ nvidia-smi -L; lscpu | grep -i "model name\|^CPU(s)"; } > $OUT/machine.txt 2>&1
S=$OUT/summary.txt; T=/tmp/s25f; mkdir -p $T
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=/tmp/n/lib:$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0 DTRAIN_MPI_DEVICE_POINTERS=stage DTRAIN_PLAN_CACHE=/tmp/plans DTRAIN_REQUIRE_GPU=1
MPI=(mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_MPI_DEVICE_POINTERS -x DTRAIN_PLAN_CACHE -x DTRAIN_REQUIRE_GPU)
B=("${MPI[@]}" --bind-to none)
TS=/tmp/n/bin/tests
ck() {  # ck NAME LIMIT COMMAND...
  local name=$1 lim=$2; shift 2
  [ $((SECONDS + 20)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  timeout -k 5 $lim "$@" > $T/$name.log 2>&1
  local rc=$?; echo "$([ $rc = 0 ] && echo PASS || echo FAIL) $name rc $rc secs $SECONDS" >> $S
}
bt() {  # bt NAME LANES NP RPN ARGS...   LANES: - for the default
  local name=$1 lanes=$2 np=$3 rpn=$4; shift 4
  [ $((SECONDS + 25)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  local lay=(); [ "$rpn" = - ] || lay=(-x DTRAIN_RANKS_PER_NODE=$rpn)
  local ln=(); [ "$lanes" = - ] || ln=(-x DTRAIN_RING_LANES=$lanes)
  timeout -k 5 120 "${B[@]}" "${ln[@]}" -np $np "${lay[@]}" /tmp/n/bin/dtrain-bench-train --precision bf16 \
    --batch-per-rank 256 --timing-warmup-steps 10 --steps 30 --world-sizes $np --metrics-file $T/$name.json "$@" > $T/$name.log 2>&1
  echo "$name rc $? $(awk -v n=$np '$1 == n && $2 ~ /^[0-9.]+$/ {print $2, "img/s/GPU", $NF}' $T/$name.log | tail -1) $(grep -h 'ms (10th percentile' $T/$name.log | tail -1 | sed 's/.*step \([0-9. \/]*\) ms.*/p10\/p50\/p90 \1 ms/') secs $SECONDS" >> $S
}
tr() {  # tr NAME RPN ARGS...: dtrain-train, synthetic, 4 ranks, 3 epochs of 20 steps, the default lanes
  local name=$1 rpn=$2; shift 2
  [ $((SECONDS + 40)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  timeout -k 5 150 "${B[@]}" -np 4 -x DTRAIN_RANKS_PER_NODE=$rpn /tmp/n/bin/dtrain-train --device gpu \
    --precision bf16 --dataset synthetic --synthetic_samples 20480 --batch_per_rank 256 --epochs 3 --log_every_steps 0 \
    --max_validation_batches 1 --timing_warmup_steps 5 --run-dir /tmp/runs/$name --metrics_file $T/$name.jsonl "$@" > $T/$name.log 2>&1
  echo "$name rc $? $(python3 -c "
import json
r=[json.loads(l) for l in open('$T/$name.jsonl') if '\"validation\"' in l]
print(' '.join('%.1f' % x['img_per_sec_per_rank'] for x in r))" 2>&1) $(grep -ho 'ring lane(s)' $T/$name.log | head -1) secs $SECONDS" >> $S
}
MN=("${MPI[@]}" -np 2)
for b in hierarchical mpi_ring; do
  ck multinode_train_steps_$b 200 "${MN[@]}" $TS/dtrain-multinode-gpu-mpi-tests --gtest_filter="*/MultiNodeTraining.*/$b"
  ck multinode_train_fault_$b 200 "${MN[@]}" $TS/dtrain-multinode-gpu-mpi-tests --gtest_filter="*/TrainingFaults.*/$b"
done
ck rank_equivalence_backends 200 "${MN[@]}" $TS/dtrain-multinode-gpu-mpi-tests --gtest_filter='*/RankEquivalenceOnBackends.*'
ck cross_node_wire 200 "${MN[@]}" $TS/dtrain-multinode-gpu-mpi-tests --gtest_filter='*/CrossNodeWireTraining.*'
ck multinode_shape_2x2 200 "${MPI[@]}" -np 4 -x DTRAIN_RANKS_PER_NODE=2 $TS/dtrain-multinode-shape-gpu-mpi-tests --gtest_filter='*/NodeShapeEquivalence.*/hierarchical_*'
ck multinode_shape_4x1 200 "${MPI[@]}" -np 4 -x DTRAIN_RANKS_PER_NODE=1 $TS/dtrain-multinode-shape-gpu-mpi-tests
ck comm_gpu_collectives_np2 200 "${MN[@]}" $TS/dtrain-comm-gpu-mpi-tests
ck comm_staging_order_np2 100 "${MN[@]}" $TS/dtrain-comm-staging-gpu-mpi-tests
ck timeline_gpu_spans 150 "${MN[@]}" $TS/dtrain-train-timeline-gpu-mpi-tests
ck comm_mpi_lanes_np4 100 "${MPI[@]}" -np 4 $TS/dtrain-comm-mpi-tests --gtest_filter='Lanes/*:*CrossNodeWire*'
grep -hs " wire, \| refused: \|worst relative" $T/multinode_shape_*.log $T/rank_equivalence_backends.log | head -12 >> $S
bt n_1gpu - 1 -
for r in 1 2 3; do
  bt lanes2_4x1_bf16_r$r - 4 1 --backend mpi-ring --gradient-wire-dtype bf16
  bt lanes1_4x1_bf16_r$r 1 4 1 --backend mpi-ring --gradient-wire-dtype bf16
done
bt lanes2_2x2 - 4 2 --backend hierarchical
tr train4x1_bf16 1 --backend mpi-ring --gradient_wire_dtype bf16
tr train2x2 2
bt lanes2_4x1_fp32 - 4 1 --backend mpi-ring --gradient-wire-dtype fp32
tar czf $OUT/logs.tgz -C /tmp s25f
cat $S
