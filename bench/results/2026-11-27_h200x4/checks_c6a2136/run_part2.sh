#!/bin/bash
# Session 19 call 2 (x4): gpu_checks lines 149-229 (sync BN, tensorboard, torchvision, timeline, python incl. mnist np4);
# xnode train; 4x1 staging traces (bf16, fp32); 2x2/4x1 variants (segment 4 MiB, NCCL_MAX_CTAS).
set -u; SECONDS=0
mkdir -p /tmp/d /tmp/fm; [ -d /tmp/fm/fmnist ] || tar xJf .device/fmnist.tar.xz -C /tmp/fm; [ -x /tmp/d/bin/dtrain-train ] || tar xJf .device/payload.tar.xz -C /tmp/d
sed -n '1,45p;149,229p' scripts/gpu_checks.sh > /tmp/partB.sh
G=/tmp/g2; mkdir -p $G
OUT=$G BIN=/tmp/d/bin DTRAIN_LIBRARY=/tmp/d/lib/libdtrain.so.1 timeout 250 bash /tmp/partB.sh /tmp/fm/fmnist > $OUT/summary.txt 2>&1
echo "checks rc $? secs $SECONDS" >> $OUT/summary.txt
X=/tmp/x; mkdir -p $X/cache; [ -d /tmp/plans ] && cp -rn /tmp/plans $X/cache/ 2>/dev/null
OUT= BIN=/tmp/d/bin XNODE_DIR=$X timeout 200 bench/run_gpu_xnode.sh train > $OUT/xnode_run.txt 2>&1
echo "xnode train rc $? secs $SECONDS" >> $OUT/summary.txt
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib NCCL_NVLS_ENABLE=0 DTRAIN_MPI_DEVICE_POINTERS=stage DTRAIN_PLAN_CACHE=$X/cache/plans
V=/tmp/v; mkdir -p $V/trace
var() {  # var NAME RPN [ENV=V...] -- bench-train args
  local name=$1 rpn=$2; shift 2; local env=(); while [ "$1" != "--" ]; do env+=(-x "$1"); shift; done; shift
  [ $((SECONDS + 40)) -lt 585 ] || { echo "$name skipped (time)" >> $V/var.txt; return; }
  timeout 60 mpirun --allow-run-as-root --bind-to none -np 4 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_MPI_DEVICE_POINTERS \
    -x DTRAIN_PLAN_CACHE -x DTRAIN_RANKS_PER_NODE=$rpn "${env[@]}" /tmp/d/bin/dtrain-bench-train --precision bf16 --batch-per-rank 256 \
    --timing-warmup-steps 10 --world-sizes 4 --metrics-file $V/$name.json "$@" > $V/$name.log 2>&1
  echo "$name rc $? $(awk '$1 == 4 && $2 ~ /^[0-9.]+$/ {print $2}' $V/$name.log | tail -1) img/s/GPU" >> $V/var.txt
}
var trace_4x1_ring_bf16 1 DTRAIN_STAGING_TRACE=$V/trace/bf16 -- --steps 12 --backend mpi-ring --gradient-wire-dtype bf16
var trace_4x1_ring_fp32 1 DTRAIN_STAGING_TRACE=$V/trace/fp32 -- --steps 12 --backend mpi-ring --gradient-wire-dtype fp32
var seg4m_2x2_default 2 DTRAIN_RING_SEGMENT_BYTES=4194304 -- --steps 30 --backend hierarchical
var ctas4_2x2_default 2 NCCL_MAX_CTAS=4 -- --steps 30 --backend hierarchical
var seg4m_4x1_ring_bf16 1 DTRAIN_RING_SEGMENT_BYTES=4194304 -- --steps 30 --backend mpi-ring --gradient-wire-dtype bf16
var piece16m_4x1_ring_bf16 1 DTRAIN_STAGING_PIECE_BYTES=16777216 -- --steps 30 --backend mpi-ring --gradient-wire-dtype bf16
var b8t1_2x2_default 2 -- --steps 30 --backend hierarchical --bucket-mib 8
var ctas2_2x2_default 2 NCCL_MAX_CTAS=2 -- --steps 30 --backend hierarchical
cat $V/var.txt >> $OUT/summary.txt
cd $G && grep -l "FAIL\|Failure" *.log > /tmp/faillist 2>/dev/null
python3 bench/summarize_xnode.py $X > $OUT/xnode_summary.txt 2>&1
tar czf $OUT/logs.tgz --exclude=x/cache --exclude=x/runs $(head -20 /tmp/faillist) python_mnist*.log sync_batch_norm*.log timeline_gpu*.log -C /tmp x v 2>/dev/null
cat $OUT/summary.txt; head -30 $OUT/xnode_summary.txt
