#!/bin/bash
# Session 28 call 5 (nvidia-h200-x2, 32 vCPUs), 286f7a9 (the epoch's median step on the GPU's clock):
# dtrain-train ResNet-50 bf16 b256, 3 epochs: 1 GPU synthetic; 2 simulated nodes x 1 GPU (auto: the
# flat staged mpi-ring, bf16 wire) synthetic and from the JPEG tree (27,600); 2 GPUs nccl from JPEG.
# Loader threads: dtrain-train's default (a rank's share of the host less two: 14 with 2 ranks).
set -u; SECONDS=0
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 DTRAIN_PLAN_CACHE=/tmp/plans DTRAIN_MPI_DEVICE_POINTERS=stage; mkdir -p $DTRAIN_PLAN_CACHE
B=/tmp/b; mkdir -p $B; tar xJf .device/s28/p4.tar.xz -C $B
S=$OUT/summary.txt; L=/tmp/logs; mkdir -p $L
{ nvidia-smi -L; echo "nproc $(nproc)"; lscpu | grep -E "Model name"; } | tee $OUT/machine.txt > $S
$B/dtrain-make-image-tree /tmp/tree --realistic --classes 100 --train-per-class 276 --val-per-class 10 --seed 1 --threads $(nproc) > $L/tree.log 2>&1
echo "tree: exit $? at $SECONDS s, $(find /tmp/tree/train -type f | wc -l) training files" >> $S
find /tmp/tree -type f -print0 | xargs -0 cat > /dev/null
MPI="mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_PLAN_CACHE -x DTRAIN_MPI_DEVICE_POINTERS"
RN50="--batch_per_rank 256 --log_every_steps 10 --max_validation_batches 4 --epochs 3"
train() {  # train NAME NP LAYOUT ARGS...
  local name=$1 np=$2 layout=$3; shift 3
  echo "== $name (np $np $layout): $*" >> $S
  timeout 150 $MPI -np $np $layout $B/dtrain-train $RN50 --metrics_file $L/$name.jsonl "$@" > $L/$name.log 2>&1
  echo "exit $? at $SECONDS s" >> $S
  grep -E "loader threads|communicator:|epoch [0-9]+:|rror" $L/$name.log | sed 's/.*INFO  //' | sed -E "s/train loss .* images\), //" | cut -c1-200 >> $S
}
SYN="--dataset synthetic --synthetic_samples 27648"
JPG="--dataset imagenet --data_dir /tmp/tree"
N2="-x DTRAIN_RANKS_PER_NODE=1"
train synthetic_1gpu 1 "" $SYN
train synthetic_2x1 2 "$N2" $SYN
train jpeg_2x1 2 "$N2" $JPG
train jpeg_2gpu_nccl 2 "" $JPG
[ $SECONDS -lt 380 ] && train synthetic_2gpu_nccl 2 "" $SYN
rm -f $L/tree.log; tar czf $OUT/logs.tgz -C /tmp logs
cat $S
