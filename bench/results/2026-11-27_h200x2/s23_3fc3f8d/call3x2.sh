#!/bin/bash
# Session 23 call 3 (x2): dtrain.torch with main's library (payload; the failure fix makes dtrain_wait_stream wait for
# a cross-node step on the host) against the library measured in s22 (.device/nb: 6084008) and DDP on sockets at 2x1,
# two rounds (buckets are main's default across nodes); 1 GPU; 4 GPUs eager and compiled against DDP (issue 35's bars);
# then dtrain-bench-train 1 GPU with --op-times-steps (where the step's time goes) and the torch.compile peer (issue 38).
set -u; SECONDS=0; END=585
mkdir -p /tmp/d; [ -x /tmp/d/bin/dtrain-bench-train ] || tar xJf .device/payload.tar.xz -C /tmp/d
S=$OUT/summary.txt; T=/tmp/t4; mkdir -p $T
PY=/opt/torch/.venv/bin/python
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib NCCL_NVLS_ENABLE=0
export DTRAIN_LIBRARY=/tmp/d/lib/libdtrain.so.1 PYTHONPATH=$PWD/python PYTHONDONTWRITEBYTECODE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
MPI=(mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_LIBRARY -x PYTHONPATH -x PYTHONDONTWRITEBYTECODE -x TORCHINDUCTOR_CACHE_DIR)
run() {  # run NAME NP LIMIT [ENV=V...] -- MODE
  local name=$1 np=$2 lim=$3; shift 3; local env=() set=(); while [[ $1 != -- ]]; do set+=("$1"); env+=(-x "${1%%=*}"); shift; done; shift
  [ $((SECONDS + lim / 2)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  env "${set[@]}" timeout -k 5 $lim "${MPI[@]}" "${env[@]}" -np "$np" $PY bench/torch/train_resnet.py --mode "$1" --json "$T/$name.json" \
    --steps 40 --warmup 15 > "$T/$name.log" 2>&1
  local rc=$?; local line; line=$(grep -h "images/s per GPU" "$T/$name.log" | tail -1)
  printf "%-28s %s (secs %s)\n" "$name" "${line:-FAILED (rc $rc)}" "$SECONDS" >> $S
}
mkdir -p /tmp/nb; cp .device/nb/libdtrain.so.1 /tmp/nb/
run dtrain_1gpu 1 60 -- dtrain
for r in 1 2; do
  run main_2x1_r$r 2 60 DTRAIN_RANKS_PER_NODE=1 -- dtrain
  run s22lib_2x1_r$r 2 60 DTRAIN_RANKS_PER_NODE=1 DTRAIN_LIBRARY=/tmp/nb/libdtrain.so.1 DTRAIN_TORCH_BUCKET_MIB=25 -- dtrain
  run ddp_2x1_sockets_r$r 2 60 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 -- ddp
done
run main_2gpu 2 60 -- dtrain
run ddp_2gpu 2 60 -- ddp
cat $S
export DTRAIN_PLAN_CACHE=/tmp/plans
[ $((SECONDS + 90)) -lt $END ] && { timeout 120 /tmp/d/bin/dtrain-bench-train --precision bf16 --batch-per-rank 256 --timing-warmup-steps 15 --steps 30 \
  --op-times-steps 5 --metrics-file $T/bench_train_op_times.json > $T/bench_train_op_times.log 2>&1; echo "bench-train op times rc $? secs $SECONDS" >> $S; }
[ $((SECONDS + 100)) -lt $END ] && { timeout $((END - SECONDS)) $PY bench/peers/pytorch_resnet50.py --precision bf16 --batch-per-rank 256 --mode compile \
  --timing-warmup-steps 15 --steps 30 --metrics-file $T/peer_compile_1gpu.json > $T/peer_compile_1gpu.log 2>&1; echo "peer compile 1gpu rc $? $(grep -h 'img/s' $T/peer_compile_1gpu.log | tail -1) secs $SECONDS" >> $S; }
tar czf $OUT/logs.tgz -C /tmp t4
cat $S; grep "^#   \|in all" $T/bench_train_op_times.log
