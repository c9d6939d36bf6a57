#!/bin/bash
# Session 25 call 2 (x4): 4x1 staged mpi-ring, main ff92f67 (m) against bucket_lanes (l), interleaved rounds:
# bucket sizes 25 (default) / 8 / 4 MiB with the bf16 wire, 25 / 8 with fp32; a 2-lane host ring probe
# (DTRAIN_RING_LANES=2); then dtrain-train timelines of the 4x1 bf16 step (main and lanes) and their phases.
set -u; SECONDS=0; END=${END:-420}
mkdir -p /tmp/m /tmp/l; [ -x /tmp/m/bin/dtrain-train ] || tar xJf .device/payload_main.tar.xz -C /tmp/m
[ -x /tmp/l/bin/dtrain-train ] || tar xJf .device/s25/lanes.tar.xz -C /tmp/l
{ nvidia-smi -L; lscpu | grep -i "model name\|^CPU(s)"; } > $OUT/machine.txt 2>&1
S=$OUT/summary.txt; T=/tmp/s25b; mkdir -p $T
SP=/opt/torch/.venv/lib/python3.12/site-packages
NV=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0 DTRAIN_MPI_DEVICE_POINTERS=stage DTRAIN_PLAN_CACHE=/tmp/plans
MPI=(mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_MPI_DEVICE_POINTERS -x DTRAIN_PLAN_CACHE)
bt() {  # bt NAME TREE NP RPN ARGS...   TREE: m (main) or l (lanes)
  local name=$1 tree=$2 np=$3 rpn=$4; shift 4
  [ $((SECONDS + 25)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  local lay=(); [ "$rpn" = - ] || lay=(-x DTRAIN_RANKS_PER_NODE=$rpn)
  LD_LIBRARY_PATH=/tmp/$tree/lib:$NV timeout -k 5 120 "${MPI[@]}" ${XMPI:-} -np $np "${lay[@]}" /tmp/$tree/bin/dtrain-bench-train --precision bf16 \
    --batch-per-rank 256 --timing-warmup-steps 10 --steps 30 --world-sizes $np --metrics-file $T/$name.json "$@" > $T/$name.log 2>&1
  echo "$name rc $? $(awk -v n=$np '$1 == n && $2 ~ /^[0-9.]+$/ {print $2, "img/s/GPU", $NF}' $T/$name.log | tail -1) $(grep -h 'ms (10th percentile' $T/$name.log | tail -1 | sed 's/.*step \([0-9. \/]*\) ms.*/p10\/p50\/p90 \1 ms/') secs $SECONDS" >> $S
}
R=(--backend mpi-ring)
bt m_1gpu m 1 -
for r in 1 2; do
  for b in 25 8 4; do
    bt m_bf16_b${b}_r$r m 4 1 "${R[@]}" --gradient-wire-dtype bf16 --bucket-mib $b
    bt l_bf16_b${b}_r$r l 4 1 "${R[@]}" --gradient-wire-dtype bf16 --bucket-mib $b
  done
done
for b in 25 8; do
  bt m_fp32_b$b m 4 1 "${R[@]}" --gradient-wire-dtype fp32 --bucket-mib $b
  bt l_fp32_b$b l 4 1 "${R[@]}" --gradient-wire-dtype fp32 --bucket-mib $b
done
XMPI="-x DTRAIN_RING_LANES=2" bt m_bf16_b25_lanes2 m 4 1 "${R[@]}" --gradient-wire-dtype bf16
tl() {  # tl NAME TREE ARGS...: dtrain-train's timeline of steps 21-25, 4x1 staged mpi-ring, and its phases
  local name=$1 tree=$2; shift 2
  [ $((SECONDS + 50)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  LD_LIBRARY_PATH=/tmp/$tree/lib:$NV timeout -k 5 150 "${MPI[@]}" -np 4 -x DTRAIN_RANKS_PER_NODE=1 /tmp/$tree/bin/dtrain-train \
    --device gpu --precision bf16 --dataset synthetic --synthetic_samples 12800 --batch_per_rank 256 --epochs 3 \
    --max-total-steps 25 --log_every_steps 5 --max_validation_batches 1 --timeline-steps 21:25 --backend mpi-ring \
    --run-dir /tmp/runs/$name --timeline $T/trace_$name.json "$@" > $T/$name.log 2>&1
  echo "$name rc $? secs $SECONDS" >> $S
  python3 scripts/timeline_phases.py $T/trace_$name.json > $T/phases_$name.txt 2>&1
  grep -A14 "^mean of" $T/phases_$name.txt >> $S
}
tl tl_m_bf16 m --gradient_wire_dtype bf16
tl tl_l_bf16 l --gradient_wire_dtype bf16
tl tl_l_bf16_b8 l --gradient_wire_dtype bf16 --bucket-mib 8
tar czf $OUT/logs.tgz -C /tmp s25b
cat $S
