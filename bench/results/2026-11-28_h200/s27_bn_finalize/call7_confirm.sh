#!/bin/bash
# Device call 7 (1 H200): main 596ad21 (A) against 8ca9026 (B), dtrain-bench-train ResNet-50 bf16
# b256, graphs on, 2 interleaved rounds, then torch.compile in the same call.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
B=/tmp/b; mkdir -p $B; tar xJf .device/s27/p7.tar.xz -C $B
nvidia-smi -L > $OUT/machine.txt
OUT=$OUT/ab DTRAIN_PLAN_CACHE=/tmp/plans bench/run_gpu_train_ab.sh $B/a-596ad21 $B/b-8ca9026 2
timeout 130 /opt/torch/.venv/bin/python bench/peers/pytorch_resnet50.py --precision bf16 --batch 256 --mode compile \
  --json $OUT/peer_compile.json > $OUT/peer_compile.log 2>&1; echo "peer rc $?"; tail -1 $OUT/peer_compile.log
rm -rf $OUT/ab/plan_cache $OUT/ab/*.log
