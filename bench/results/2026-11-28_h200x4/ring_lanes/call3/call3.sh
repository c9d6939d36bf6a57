#!/bin/bash
# Session 25 call 3 (x4): the host ring with 1, 2 and 4 lanes (DTRAIN_RING_LANES) at 4 simulated nodes x 1 GPU, main ff92f67:
# Open MPI's shared-memory single-copy setting; dtrain-bench-allreduce 64 MiB fp32 host and staged device mpi-ring;
# dtrain-bench-train 4x1 staged mpi-ring bf16 (3 rounds interleaved) and fp32, lanes with 4 and 16 MiB staging pieces;
# 2x2 hierarchical (the cross-node ring is a 2-rank ring) with 1 and 2 lanes.
set -u; SECONDS=0; END=${END:-400}
mkdir -p /tmp/m; [ -x /tmp/m/bin/dtrain-train ] || tar xJf .device/payload_main.tar.xz -C /tmp/m
{ nvidia-smi -L; lscpu | grep -i "model name\|^CPU(s)"; ompi_info --param btl vader --level 9 2>&1 | grep -i "single_copy"; ompi_info --param smsc all --level 9 2>&1 | head -5; } > $OUT/machine.txt 2>&1
S=$OUT/summary.txt; T=/tmp/s25c; mkdir -p $T
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=/tmp/m/lib:$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0 DTRAIN_MPI_DEVICE_POINTERS=stage DTRAIN_PLAN_CACHE=/tmp/plans
MPI=(mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_MPI_DEVICE_POINTERS -x DTRAIN_PLAN_CACHE)
bt() {  # bt NAME LANES PIECE_MIB NP RPN ARGS...
  local name=$1 lanes=$2 piece=$3 np=$4 rpn=$5; shift 5
  [ $((SECONDS + 25)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  local lay=(); [ "$rpn" = - ] || lay=(-x DTRAIN_RANKS_PER_NODE=$rpn)
  timeout -k 5 120 "${MPI[@]}" -x DTRAIN_RING_LANES=$lanes -x DTRAIN_STAGING_PIECE_BYTES=$((piece << 20)) -np $np "${lay[@]}" \
    /tmp/m/bin/dtrain-bench-train --precision bf16 \
    --batch-per-rank 256 --timing-warmup-steps 10 --steps 30 --world-sizes $np --metrics-file $T/$name.json "$@" > $T/$name.log 2>&1
  echo "$name rc $? $(awk -v n=$np '$1 == n && $2 ~ /^[0-9.]+$/ {print $2, "img/s/GPU", $NF}' $T/$name.log | tail -1) $(grep -h 'ms (10th percentile' $T/$name.log | tail -1 | sed 's/.*step \([0-9. \/]*\) ms.*/p10\/p50\/p90 \1 ms/') secs $SECONDS" >> $S
}
ar() {  # ar NAME LANES ARGS...: 64 MiB fp32 sum on 4 simulated nodes of one rank
  local name=$1 lanes=$2; shift 2
  [ $((SECONDS + 25)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  timeout -k 5 90 "${MPI[@]}" -x DTRAIN_RING_LANES=$lanes -np 4 -x DTRAIN_RANKS_PER_NODE=1 "$@" /tmp/m/bin/dtrain-bench-allreduce \
    --backend mpi-ring -b 64M -e 64M -w 5 --iters 20 --metrics-file $T/$name.json > $T/$name.log 2>&1
  echo "$name rc $? $(grep -v '^#' $T/$name.log | awk 'NF > 4' | tail -1)" >> $S
}
R=(--backend mpi-ring --gradient-wire-dtype bf16)
bt m_1gpu 1 4 1 -
for r in 1 2 3; do
  for l in 1 2 4; do bt bf16_lanes${l}_r$r $l 4 4 1 "${R[@]}"; done
done
for l in 2 4; do bt bf16_lanes${l}_piece16 $l 16 4 1 "${R[@]}"; done
bt bf16_lanes1_piece16 1 16 4 1 "${R[@]}"
for l in 1 2 4; do
  ar host_lanes$l $l -x CUDA_VISIBLE_DEVICES=
  ar device_lanes$l $l
done
head -3 $T/host_lanes1.log >> $S
for l in 1 2; do bt fp32_lanes$l $l 4 4 1 --backend mpi-ring --gradient-wire-dtype fp32; done
for l in 1 2; do bt hier2x2_lanes$l $l 4 4 2 --backend hierarchical; done
tar czf $OUT/logs.tgz -C /tmp s25c
cat $S
