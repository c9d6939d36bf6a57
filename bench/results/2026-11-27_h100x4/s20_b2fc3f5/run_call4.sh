#!/bin/bash
# Session 20 call 4 (x4): dtrain.torch vs DDP eager (1 GPU, 4 GPUs, 2x2 pairs vs DDP sockets); then dtrain-train synthetic
# 1 GPU and 2x2 (the path users run) and DDP+compile on sockets at 2x2 (bench/run_gpu_xnode.sh's peer).
set -u; SECONDS=0; END=470
mkdir -p /tmp/d; [ -x /tmp/d/bin/dtrain-bench-train ] || tar xJf .device/payload.tar.xz -C /tmp/d
{ nvidia-smi -L; echo "nproc $(nproc)"; } > $OUT/machine.txt 2>&1
S=$OUT/summary.txt; T=/tmp/t4; mkdir -p $T
PY=/opt/torch/.venv/bin/python
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib NCCL_NVLS_ENABLE=0
export DTRAIN_LIBRARY=/tmp/d/lib/libdtrain.so.1 PYTHONPATH=$PWD/python PYTHONDONTWRITEBYTECODE=1
MPI=(mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_LIBRARY -x PYTHONPATH -x PYTHONDONTWRITEBYTECODE)
run() {  # run NAME NP [ENV=V...] -- MODE
  local name=$1 np=$2; shift 2; local env=(); while [[ $1 != -- ]]; do env+=(-x "$1"); shift; done; shift
  [ $((SECONDS + 45)) -lt $END ] || { echo "$name skipped (time)" >> $S; return; }
  timeout -k 5 90 "${MPI[@]}" "${env[@]}" -np "$np" $PY bench/torch/train_resnet.py --mode "$1" --json "$T/$name.json" \
    --steps 40 --warmup 15 > "$T/$name.log" 2>&1
  local rc=$?; local line; line=$(grep -h "images/s per GPU" "$T/$name.log" | tail -1)
  printf "%-24s %s (secs %s)\n" "$name" "${line:-FAILED (rc $rc)}" "$SECONDS" >> $S
}
run dtrain_1gpu 1 -- dtrain
run dtrain_4gpu 4 -- dtrain
run ddp_4gpu 4 -- ddp
for r in 1 2; do
  run dtrain_2x2_nodes_r$r 4 DTRAIN_RANKS_PER_NODE=2 -- dtrain
  run ddp_2x2_sockets_r$r 4 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 -- ddp
done
X=/tmp/x; mkdir -p $X/cache; cp -r /tmp/plans $X/cache/plans 2>/dev/null
[ $((SECONDS + 60)) -lt $END ] && { OUT= BIN=/tmp/d/bin XNODE_DIR=$X timeout $((END - SECONDS)) bash -c 'sed -i "s/^  dtrain_train e2e_jpeg/  : dtrain_train e2e_jpeg/; s/^  \[\[ -d \$JPEG_DIR/  : [[ -d \$JPEG_DIR/; s/^  \[\[ \$DRY_RUN == 1 \]\] || find/  : find/" bench/run_gpu_xnode.sh; bench/run_gpu_xnode.sh e2e' > $X/e2e_run.txt 2>&1; echo "e2e rc $? secs $SECONDS" >> $S; }
[ $((SECONDS + 80)) -lt $END ] && { OUT= BIN=/tmp/d/bin XNODE_DIR=$X PY=$PY timeout $((END + 40 - SECONDS)) bash -c 'sed -i "s/^  peer 4x1_sockets/  : peer 4x1/; s/^  peer 2x2_nvlink_inside/  : peer 2x2_nv/" bench/run_gpu_xnode.sh; bench/run_gpu_xnode.sh peer' > $X/peer_run.txt 2>&1; echo "peer rc $? secs $SECONDS" >> $S; }
cat $X/steps.txt >> $S 2>/dev/null
tar czf $OUT/logs.tgz --exclude=cache --exclude='runs/*/ckpt*' -C /tmp t4 x
cat $S
