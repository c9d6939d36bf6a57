#!/bin/bash
# Session 19 call 3 (x4): issue 35 (dtrain.torch vs DDP: 1 GPU, 4 GPUs, 2x2 nodes vs DDP sockets; CPU all-reduce vs gloo
# on this machine's CPUs); then 1-GPU bench-train eager and graphs at the merged BN kernels.
set -u; SECONDS=0
mkdir -p /tmp/d; rm -rf /tmp/d/*; tar xJf .device/payload.tar.xz -C /tmp/d
{ nvidia-smi -L; echo "nproc $(nproc)"; lscpu | grep -i "model name\|flags" | cut -c1-400; } > $OUT/machine.txt
T=/tmp/t; mkdir -p $T
PY=/opt/torch/.venv/bin/python
export DTRAIN_LIBRARY=/tmp/d/lib/libdtrain.so.1 PYTHONPATH=$PWD/python PYTHONDONTWRITEBYTECODE=1
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib NCCL_NVLS_ENABLE=0
MPI=(mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_LIBRARY -x PYTHONPATH -x PYTHONDONTWRITEBYTECODE)
run() {  # run NAME NP [ENV=V...] -- MODE
  local name=$1 np=$2; shift 2; local env=(); while [[ $1 != -- ]]; do env+=(-x "$1"); shift; done; shift
  [ $((SECONDS + 60)) -lt 560 ] || { echo "$name skipped (time)" | tee -a $T/summary.txt; return; }
  timeout -k 10 150 "${MPI[@]}" "${env[@]}" -np "$np" $PY bench/torch/train_resnet.py --mode "$1" --json "$T/$name.json" \
    --steps 40 --warmup 15 > "$T/$name.log" 2>&1
  local rc=$?; local line; line=$(grep -h "images/s per GPU" "$T/$name.log" | tail -1)
  printf "%-28s %s (secs %s)\n" "$name" "${line:-FAILED (rc $rc)}" "$SECONDS" | tee -a "$T/summary.txt"
}
run dtrain_2x2_nodes 4 DTRAIN_RANKS_PER_NODE=2 -- dtrain
run ddp_2x2_sockets 4 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 -- ddp
run dtrain_1gpu 1 -- dtrain
run dtrain_4gpu 4 -- dtrain
run ddp_4gpu 4 -- ddp
run dtrain_2x2_nodes_r2 4 DTRAIN_RANKS_PER_NODE=2 -- dtrain
run ddp_2x2_sockets_r2 4 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 -- ddp
# CPU tensors: dtrain.torch vs gloo on this machine's CPUs (no GPU visible)
C=/tmp/c; mkdir -p $C
[ $((SECONDS + 90)) -lt 560 ] && CUDA_VISIBLE_DEVICES= PY=$PY OUT=$C timeout 120 bash bench/torch/run_cpu.sh 2 > $C/run.log 2>&1; echo "cpu rc $? secs $SECONDS" >> $T/summary.txt
# 1 GPU bench-train, merged BN kernels: eager and graphs
export DTRAIN_PLAN_CACHE=/tmp/plans
for g in 0 1; do
  [ $((SECONDS + 50)) -lt 585 ] || break
  DTRAIN_CUDA_GRAPHS=$g timeout 90 /tmp/d/bin/dtrain-bench-train --precision bf16 --batch-per-rank 256 --timing-warmup-steps 15 --steps 40 \
    --metrics-file $T/bench_train_graphs$g.json > $T/bench_train_graphs$g.log 2>&1
  echo "bench-train graphs=$g rc $? $(awk '$1 == 1 && $2 ~ /^[0-9.]+$/ {print $2}' $T/bench_train_graphs$g.log | tail -1) img/s secs $SECONDS" >> $T/summary.txt
done
tar czf $OUT/logs.tgz -C /tmp t c 2>/dev/null
cat $T/summary.txt; cat $C/summary.txt 2>/dev/null | tail -12
