#!/bin/bash
# Session 24 call E (x4): graphs_staged + loader_priority merged (974ca6a): JPEG dtrain-train 1 GPU, 2x2 nice 0 vs 5 (2 rounds),
# 4 nccl; then bench-train 4x1 mpi-ring bf16 graphs 0 vs 1 (2 rounds) and fp32.
set -u; SECONDS=0; END=540
mkdir -p /tmp/mg; tar xJf .device/s24/mg.tar.xz -C /tmp/mg
nvidia-smi -L > $OUT/machine.txt
S=$OUT/summary.txt; T=/tmp/s24e; mkdir -p $T
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib NCCL_NVLS_ENABLE=0 DTRAIN_MPI_DEVICE_POINTERS=stage DTRAIN_PLAN_CACHE=/tmp/plans
MPI=(mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_MPI_DEVICE_POINTERS -x DTRAIN_PLAN_CACHE)
J=/tmp/jpeg552; BIN=/tmp/mg TRAIN_PER_CLASS=552 bash bench/make_jpeg_tree.sh $J > $T/make_tree.log 2>&1
echo "tree rc $? secs $SECONDS" >> $S
find $J -type f -print0 | xargs -0 cat > /dev/null
RN=(--batch_per_rank 256 --log_every_steps 0 --timing_warmup_steps 5 --max_validation_batches 4 --dataset imagenet --data_dir $J --epochs 3)
tr() {  # tr NAME NICE NP RPN ARGS...   (NICE: - for unset)
  local name=$1 nice=$2 np=$3 rpn=$4; shift 4
  [ $((SECONDS + 30)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  local lay=(); [ "$rpn" = - ] || lay=(-x DTRAIN_RANKS_PER_NODE=$rpn)
  local ni=(); [ "$nice" = - ] || ni=(-x DTRAIN_LOADER_NICE=$nice)
  rm -rf /tmp/runs/$name
  timeout -k 5 150 "${MPI[@]}" -np $np "${lay[@]}" "${ni[@]}" /tmp/mg/dtrain-train --device gpu "${RN[@]}" --metrics_file $T/$name.jsonl \
    --run-dir /tmp/runs/$name "$@" > $T/$name.log 2>&1
  echo "$name rc $? $(python3 -c "
import json,sys
r=[json.loads(l) for l in open('$T/$name.jsonl') if '\"validation\"' in l]
print(' '.join('%.1f' % x['img_per_sec_per_rank'] for x in r), 'wait', ' '.join('%.4f' % x['data_wait_fraction'] for x in r))" 2>&1) secs $SECONDS" >> $S
}
bt() {  # bt NAME GRAPHS NP RPN ARGS...
  local name=$1 g=$2 np=$3 rpn=$4; shift 4
  [ $((SECONDS + 25)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  local lay=(); [ "$rpn" = - ] || lay=(-x DTRAIN_RANKS_PER_NODE=$rpn)
  timeout -k 5 120 "${MPI[@]}" -np $np "${lay[@]}" -x DTRAIN_CUDA_GRAPHS=$g /tmp/mg/dtrain-bench-train --precision bf16 \
    --batch-per-rank 256 --timing-warmup-steps 10 --steps 30 --world-sizes $np --metrics-file $T/$name.json "$@" > $T/$name.log 2>&1
  echo "$name rc $? $(awk -v n=$np '$1 == n && $2 ~ /^[0-9.]+$/ {print $2, "img/s/GPU overlap", $NF}' $T/$name.log | tail -1) | $(grep -h 'CUDA graphs' $T/$name.log | tail -1 | cut -c1-70) secs $SECONDS" >> $S
}
tr jpeg_1gpu_nice5 - 1 -
for r in 1 2; do
  tr jpeg_2x2_nice0_r$r 0 4 2
  tr jpeg_2x2_nice5_r$r - 4 2
done
tr jpeg_4gpu_nccl_nice5 - 4 - --backend nccl
grep -h "loader threads\|engine" $T/jpeg_2x2_nice5_r1.log | head -2 >> $S
for r in 1 2; do
  bt g0_4x1_ring_bf16_r$r 0 4 1 --backend mpi-ring --gradient-wire-dtype bf16
  bt g1_4x1_ring_bf16_r$r 1 4 1 --backend mpi-ring --gradient-wire-dtype bf16
done
bt g0_4x1_ring_fp32 0 4 1 --backend mpi-ring --gradient-wire-dtype fp32
bt g1_4x1_ring_fp32 1 4 1 --backend mpi-ring --gradient-wire-dtype fp32
tar czf $OUT/logs.tgz -C /tmp s24e
cat $S
