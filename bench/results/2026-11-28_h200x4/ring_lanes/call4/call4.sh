#!/bin/bash
# Session 25 call 4 (x4): 2 host-ring lanes (DTRAIN_RING_LANES=2) against 1, main ff92f67, interleaved rounds:
# dtrain-bench-train 2x2 hierarchical (fp32 and bf16 wire; the cross-node ring has 2 ranks) and 4x1 staged mpi-ring bf16;
# dtrain-train (synthetic) 2x2 and 4x1 bf16; 2-rank staged 64 MiB fp32 all-reduce with --bind-to none and mpirun's
# default binding (a core per rank at 2 ranks), where lanes once ran 2.7x slower.
set -u; SECONDS=0; END=${END:-420}
mkdir -p /tmp/m; [ -x /tmp/m/bin/dtrain-train ] || tar xJf .device/payload_main.tar.xz -C /tmp/m
{ nvidia-smi -L; lscpu | grep -i "model name\|^CPU(s)"; } > $OUT/machine.txt 2>&1
S=$OUT/summary.txt; T=/tmp/s25d; mkdir -p $T
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=/tmp/m/lib:$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0 DTRAIN_MPI_DEVICE_POINTERS=stage DTRAIN_PLAN_CACHE=/tmp/plans
MPI0=(mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_MPI_DEVICE_POINTERS -x DTRAIN_PLAN_CACHE)
MPI=("${MPI0[@]}" --bind-to none)
bt() {  # bt NAME LANES NP RPN ARGS...
  local name=$1 lanes=$2 np=$3 rpn=$4; shift 4
  [ $((SECONDS + 25)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  local lay=(); [ "$rpn" = - ] || lay=(-x DTRAIN_RANKS_PER_NODE=$rpn)
  timeout -k 5 120 "${MPI[@]}" -x DTRAIN_RING_LANES=$lanes -np $np "${lay[@]}" /tmp/m/bin/dtrain-bench-train --precision bf16 \
    --batch-per-rank 256 --timing-warmup-steps 10 --steps 30 --world-sizes $np --metrics-file $T/$name.json "$@" > $T/$name.log 2>&1
  echo "$name rc $? $(awk -v n=$np '$1 == n && $2 ~ /^[0-9.]+$/ {print $2, "img/s/GPU", $NF}' $T/$name.log | tail -1) $(grep -h 'ms (10th percentile' $T/$name.log | tail -1 | sed 's/.*step \([0-9. \/]*\) ms.*/p10\/p50\/p90 \1 ms/') secs $SECONDS" >> $S
}
tr() {  # tr NAME LANES RPN ARGS...: dtrain-train, synthetic, 4 ranks, 3 epochs of 12 steps
  local name=$1 lanes=$2 rpn=$3; shift 3
  [ $((SECONDS + 40)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  timeout -k 5 150 "${MPI[@]}" -x DTRAIN_RING_LANES=$lanes -np 4 -x DTRAIN_RANKS_PER_NODE=$rpn /tmp/m/bin/dtrain-train --device gpu \
    --precision bf16 --dataset synthetic --synthetic_samples 20480 --batch_per_rank 256 --epochs 3 --log_every_steps 0 \
    --max_validation_batches 1 --timing_warmup_steps 5 --run-dir /tmp/runs/$name --metrics_file $T/$name.jsonl "$@" > $T/$name.log 2>&1
  echo "$name rc $? $(python3 -c "
import json
r=[json.loads(l) for l in open('$T/$name.jsonl') if '\"validation\"' in l]
print(' '.join('%.1f' % x['img_per_sec_per_rank'] for x in r))" 2>&1) secs $SECONDS" >> $S
}
ar() {  # ar NAME LANES BIND: 64 MiB fp32 sum, staged device buffers, 2 ranks as 2 simulated nodes
  local name=$1 lanes=$2 bind=$3
  [ $((SECONDS + 25)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  local m=("${MPI[@]}"); [ $bind = default ] && m=("${MPI0[@]}")
  timeout -k 5 60 "${m[@]}" -x DTRAIN_RING_LANES=$lanes -np 2 -x DTRAIN_RANKS_PER_NODE=1 /tmp/m/bin/dtrain-bench-allreduce \
    --backend mpi-ring -b 64M -e 64M -w 3 --iters 10 > $T/$name.log 2>&1
  echo "$name rc $? $(grep -v '^#' $T/$name.log | awk 'NF > 4' | tail -1)" >> $S
}
bt m_1gpu 1 1 -
for l in 1 2; do ar ar2_lanes${l}_bindnone $l none; ar ar2_lanes${l}_binddefault $l default; done
for r in 1 2; do
  for l in 1 2; do
    bt hier2x2_fp32_lanes${l}_r$r $l 4 2 --backend hierarchical --gradient-wire-dtype fp32
    bt hier2x2_bf16_lanes${l}_r$r $l 4 2 --backend hierarchical --gradient-wire-dtype bf16
    bt ring4x1_bf16_lanes${l}_r$r $l 4 1 --backend mpi-ring --gradient-wire-dtype bf16
  done
done
for l in 1 2; do
  tr train2x2_lanes$l $l 2
  tr train4x1_bf16_lanes$l $l 1 --backend mpi-ring --gradient_wire_dtype bf16
done
tar czf $OUT/logs.tgz -C /tmp s25d
cat $S
