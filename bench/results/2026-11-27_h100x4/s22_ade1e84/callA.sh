#!/bin/bash
# Session 22 call A (x4): dtrain.torch 2x2: main's library and branch nonblocking_device's, each with and without
# DTRAIN_TORCH_BUCKET_MIB=25, interleaved with DDP on sockets (x2); 4 GPUs with and without buckets.
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
# Branch nonblocking_device (its libdtrain.so.1 in .device/nb/; rebuild it from the branch if main moved): its
# device-library tests on hierarchical first (2 ranks as 2 nodes, 4 ranks as 2x2), then it in the 2x2 A/B.
mkdir -p /tmp/nb; cp .device/nb/libdtrain.so.1 /tmp/nb/; md5sum /tmp/nb/libdtrain.so.1 /tmp/d/lib/libdtrain.so.1 >> $S
for cfg in "2 1" "4 2"; do
  set -- $cfg
  LD_LIBRARY_PATH=/tmp/nb:$LD_LIBRARY_PATH timeout 120 mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
    -x DTRAIN_RANKS_PER_NODE=$2 -x DTRAIN_MPI_DEVICE_POINTERS=stage -x DTRAIN_REQUIRE_GPU=1 -np $1 /tmp/d/bin/tests/dtrain-library-device-test \
    > $T/nb_library_device_np$1.log 2>&1
  echo "nb library device test np$1 rpn$2 rc $? $(tail -1 $T/nb_library_device_np$1.log) secs $SECONDS" >> $S
done
run dtrain_1gpu 1 60 -- dtrain
for r in 1 2; do
  run dtrain_2x2_r$r 4 60 DTRAIN_RANKS_PER_NODE=2 -- dtrain
  run dtrain_2x2_bucket25_r$r 4 60 DTRAIN_RANKS_PER_NODE=2 DTRAIN_TORCH_BUCKET_MIB=25 -- dtrain
  run nb_2x2_r$r 4 60 DTRAIN_RANKS_PER_NODE=2 DTRAIN_LIBRARY=/tmp/nb/libdtrain.so.1 -- dtrain
  run nb_2x2_bucket25_r$r 4 60 DTRAIN_RANKS_PER_NODE=2 DTRAIN_LIBRARY=/tmp/nb/libdtrain.so.1 DTRAIN_TORCH_BUCKET_MIB=25 -- dtrain
  run ddp_2x2_sockets_r$r 4 60 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 -- ddp
done
run dtrain_4gpu_bucket25 4 60 DTRAIN_TORCH_BUCKET_MIB=25 -- dtrain
run dtrain_4gpu 4 60 -- dtrain
run nb_4gpu_bucket25 4 60 DTRAIN_LIBRARY=/tmp/nb/libdtrain.so.1 DTRAIN_TORCH_BUCKET_MIB=25 -- dtrain
tar czf $OUT/logs.tgz -C /tmp t4
cat $S
[ $((SECONDS + 40)) -lt 595 ] && { timeout -k 5 50 "${MPI[@]}" -x DTRAIN_RANKS_PER_NODE=2 -np 4 $PY bench/torch/train_resnet.py --mode dtrain \
  --steps 10 --warmup 10 --timeline $T/timeline_2x2.json > $T/timeline_2x2.log 2>&1; echo "timeline rc $? secs $SECONDS" >> $S; tar czf $OUT/logs.tgz -C /tmp t4; }
