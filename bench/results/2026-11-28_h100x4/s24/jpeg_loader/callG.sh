#!/bin/bash
# Session 24 call G (x4): graphs_staged + loader_priority merged (974ca6a): JPEG dtrain-train 1 GPU, 2x2 nice 0 vs 5 (2 rounds),
# 4 nccl; then bench-train 4x1 mpi-ring bf16 graphs 0 vs 1 (2 rounds) and fp32.
set -u; SECONDS=0; END=300
mkdir -p /tmp/mg2; tar xJf .device/s24/mg2.tar.xz -C /tmp/mg2
nvidia-smi -L > $OUT/machine.txt
S=$OUT/summary.txt; T=/tmp/s24g; mkdir -p $T
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib NCCL_NVLS_ENABLE=0 DTRAIN_MPI_DEVICE_POINTERS=stage DTRAIN_PLAN_CACHE=/tmp/plans
MPI=(mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_MPI_DEVICE_POINTERS -x DTRAIN_PLAN_CACHE)
J=/tmp/jpeg552; BIN=/tmp/mg2 TRAIN_PER_CLASS=552 bash bench/make_jpeg_tree.sh $J > $T/make_tree.log 2>&1
echo "tree rc $? secs $SECONDS" >> $S
find $J -type f -print0 | xargs -0 cat > /dev/null
RN=(--batch_per_rank 256 --log_every_steps 0 --timing_warmup_steps 5 --max_validation_batches 4 --dataset imagenet --data_dir $J --epochs 3)
tr() {  # tr NAME NICE NP RPN ARGS...   (NICE: - for unset)
  local name=$1 nice=$2 np=$3 rpn=$4; shift 4
  [ $((SECONDS + 30)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  local lay=(); [ "$rpn" = - ] || lay=(-x DTRAIN_RANKS_PER_NODE=$rpn)
  local ni=(); [ "$nice" = - ] || ni=(-x DTRAIN_CUDA_GRAPHS=$nice)
  rm -rf /tmp/runs/$name
  timeout -k 5 150 "${MPI[@]}" -np $np "${lay[@]}" "${ni[@]}" /tmp/mg2/dtrain-train --device gpu "${RN[@]}" --metrics_file $T/$name.jsonl \
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
  timeout -k 5 120 "${MPI[@]}" -np $np "${lay[@]}" -x DTRAIN_CUDA_GRAPHS=$g /tmp/mg2/dtrain-bench-train --precision bf16 \
    --batch-per-rank 256 --timing-warmup-steps 10 --steps 30 --world-sizes $np --metrics-file $T/$name.json "$@" > $T/$name.log 2>&1
  echo "$name rc $? $(awk -v n=$np '$1 == n && $2 ~ /^[0-9.]+$/ {print $2, "img/s/GPU overlap", $NF}' $T/$name.log | tail -1) | $(grep -h 'CUDA graphs' $T/$name.log | tail -1 | cut -c1-70) secs $SECONDS" >> $S
}
lscpu | grep -i "model name\|^CPU(s)" >> $OUT/machine.txt
tr jpeg_1gpu - 1 -
tr jpeg_2x2_r1 - 4 2
tr jpeg_2x2_fp32wire - 4 2 --gradient_wire_dtype fp32
tr jpeg_2x2_r2 - 4 2
tr jpeg_4nccl - 4 - --backend nccl
tr jpeg_2x2_r3 - 4 2
grep -h "loader threads" $T/jpeg_2x2_r1.log | head -1 >> $S
tar czf $OUT/logs.tgz -C /tmp s24g
cat $S
