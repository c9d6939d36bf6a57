#!/bin/bash
# Session 25 call 5 (x2): ring lanes (DTRAIN_RING_LANES 1, 2, 4) on the 2-GPU kind, where an earlier build ran 2.7x (2 lanes)
# and 12x (4 lanes) slower: 2-rank staged 64 MiB fp32 all-reduce (--bind-to none and mpirun's default core binding),
# dtrain-bench-train 2 simulated nodes x 1 GPU, staged mpi-ring bf16 and hierarchical fp32. main ff92f67.
set -u; SECONDS=0; END=${END:-200}
mkdir -p /tmp/m; [ -x /tmp/m/bin/dtrain-train ] || tar xJf .device/payload_main.tar.xz -C /tmp/m
{ nvidia-smi -L; lscpu | grep -i "model name\|^CPU(s)"; ompi_info --param btl vader --level 9 2>&1 | grep -i "single_copy"; } > $OUT/machine.txt 2>&1
S=$OUT/summary.txt; T=/tmp/s25e; mkdir -p $T
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=/tmp/m/lib:$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0 DTRAIN_MPI_DEVICE_POINTERS=stage DTRAIN_PLAN_CACHE=/tmp/plans
MPI0=(mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_MPI_DEVICE_POINTERS -x DTRAIN_PLAN_CACHE)
MPI=("${MPI0[@]}" --bind-to none)
ar() {  # ar NAME LANES BIND
  local name=$1 lanes=$2 bind=$3
  [ $((SECONDS + 20)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  local m=("${MPI[@]}"); [ $bind = default ] && m=("${MPI0[@]}")
  timeout -k 5 60 "${m[@]}" -x DTRAIN_RING_LANES=$lanes -np 2 -x DTRAIN_RANKS_PER_NODE=1 /tmp/m/bin/dtrain-bench-allreduce \
    --backend mpi-ring -b 64M -e 64M -w 3 --iters 10 > $T/$name.log 2>&1
  echo "$name rc $? $(grep -v '^#' $T/$name.log | awk 'NF > 4' | tail -1)" >> $S
}
bt() {  # bt NAME LANES ARGS...
  local name=$1 lanes=$2; shift 2
  [ $((SECONDS + 25)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  timeout -k 5 100 "${MPI[@]}" -x DTRAIN_RING_LANES=$lanes -np 2 -x DTRAIN_RANKS_PER_NODE=1 /tmp/m/bin/dtrain-bench-train --precision bf16 \
    --batch-per-rank 256 --timing-warmup-steps 10 --steps 30 --world-sizes 2 --metrics-file $T/$name.json "$@" > $T/$name.log 2>&1
  echo "$name rc $? $(awk '$1 == 2 && $2 ~ /^[0-9.]+$/ {print $2, "img/s/GPU", $NF}' $T/$name.log | tail -1) $(grep -h 'ms (10th percentile' $T/$name.log | tail -1 | sed 's/.*step \([0-9. \/]*\) ms.*/p10\/p50\/p90 \1 ms/') secs $SECONDS" >> $S
}
for l in 1 2 4; do ar ar_lanes${l}_none $l none; ar ar_lanes${l}_default $l default; done
for r in 1 2; do for l in 1 2; do bt ring_bf16_lanes${l}_r$r $l --backend mpi-ring --gradient-wire-dtype bf16; done; done
for l in 1 2; do bt hier_fp32_lanes$l $l --backend hierarchical --gradient-wire-dtype fp32; done
tar czf $OUT/logs.tgz -C /tmp s25e
cat $S
