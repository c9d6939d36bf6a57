#!/bin/bash
# Session 19 call 4 (x4): issue 35: dtrain.torch 2x2 vs DDP sockets interleaved x3, fusion threshold variants,
# CPU all-reduce vs gloo (per-run logs, faulthandler), compile pair on 4 GPUs.
set -u; SECONDS=0
mkdir -p /tmp/d; [ -f /tmp/d/lib/libdtrain.so.1 ] || tar xJf .device/payload.tar.xz -C /tmp/d
{ nvidia-smi -L; echo "nproc $(nproc)"; } > $OUT/machine.txt
T=/tmp/t4; mkdir -p $T
PY=/opt/torch/.venv/bin/python
export DTRAIN_LIBRARY=/tmp/d/lib/libdtrain.so.1 PYTHONPATH=$PWD/python PYTHONDONTWRITEBYTECODE=1 PYTHONFAULTHANDLER=1
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib NCCL_NVLS_ENABLE=0 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
MPI=(mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_LIBRARY -x PYTHONPATH -x PYTHONDONTWRITEBYTECODE -x PYTHONFAULTHANDLER -x TORCHINDUCTOR_CACHE_DIR)
run() {  # run NAME NP LIMIT [ENV=V...] -- MODE
  local name=$1 np=$2 lim=$3; shift 3; local env=(); while [[ $1 != -- ]]; do env+=(-x "$1"); shift; done; shift
  [ $((SECONDS + lim)) -lt 590 ] || { echo "$name skipped (time)" | tee -a $T/summary.txt; return; }
  timeout -k 10 $lim "${MPI[@]}" "${env[@]}" -np "$np" $PY bench/torch/train_resnet.py --mode "$1" --json "$T/$name.json" \
    --steps 40 --warmup 15 > "$T/$name.log" 2>&1
  local rc=$?; local line; line=$(grep -h "images/s per GPU" "$T/$name.log" | tail -1)
  printf "%-28s %s (secs %s)\n" "$name" "${line:-FAILED (rc $rc)}" "$SECONDS" | tee -a "$T/summary.txt"
}
for r in 1 2 3; do
  run dtrain_2x2_nodes_r$r 4 60 DTRAIN_RANKS_PER_NODE=2 -- dtrain
  run ddp_2x2_sockets_r$r 4 60 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 -- ddp
done
run dtrain_2x2_fusion16m 4 60 DTRAIN_RANKS_PER_NODE=2 DTRAIN_FUSION_THRESHOLD=16777216 -- dtrain
run dtrain_2x2_fusion4m 4 60 DTRAIN_RANKS_PER_NODE=2 DTRAIN_FUSION_THRESHOLD=4194304 -- dtrain
C=/tmp/c4; mkdir -p $C
for np in 2 4; do for r in 1; do for b in dtrain gloo; do
  [ $((SECONDS + 30)) -lt 260 ] || continue
  CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1 timeout 60 mpirun --allow-run-as-root --oversubscribe -x PYTHONFAULTHANDLER -np $np $PY bench/torch/cpu_allreduce.py \
    --backend $b --json $C/${b}_np${np}_r$r.json > $C/${b}_np${np}_r$r.log 2>&1
  echo "cpu $b np$np r$r rc $? secs $SECONDS" >> $T/summary.txt
done; done; done
run dtrain_compile_4gpu 4 180 -- dtrain-compile
run ddp_compile_4gpu 4 180 -- ddp-compile
tar czf $OUT/logs.tgz -C /tmp t4 c4 2>/dev/null
cat $T/summary.txt; grep -h "dtrain \|gloo " $C/*.log | grep -v INFO | head -20; grep -l "terminate\|Fatal" $C/*.log
