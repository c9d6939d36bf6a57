#!/bin/bash
# Session 23 call 3 (x4): dtrain.torch with main's library (payload; the failure fix makes dtrain_wait_stream wait for
# a cross-node step on the host) against the library measured in s22 (.device/nb: 6084008) and DDP on sockets at 2x2,
# two rounds (buckets are main's default across nodes); 1 GPU; 4 GPUs eager and compiled against DDP (issue 35's bars);
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
  run main_2x2_r$r 4 60 DTRAIN_RANKS_PER_NODE=2 -- dtrain
  run s22lib_2x2_r$r 4 60 DTRAIN_RANKS_PER_NODE=2 DTRAIN_LIBRARY=/tmp/nb/libdtrain.so.1 DTRAIN_TORCH_BUCKET_MIB=25 -- dtrain
  run ddp_2x2_sockets_r$r 4 60 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 -- ddp
done
run main_4gpu 4 60 -- dtrain
run ddp_4gpu 4 60 -- ddp
run main_4gpu_compile 4 150 -- dtrain-compile
run ddp_4gpu_compile 4 150 -- ddp-compile

tar czf $OUT/logs.tgz -C /tmp t4

cat $S
