#!/bin/bash
# examples/torch/imagenet_resnet.py as a Horovod user runs it: 2 epochs on 2 ranks (checkpoints
# written by rank 0), then again with --epochs 3, which must resume at epoch 3 (the epoch rank 0
# found, broadcast as an int64 tensor) and train only that one.
#   imagenet_resume.sh SCRATCH_DIR SOURCE_DIR MPIRUN [MPIRUN FLAGS...]
set -euo pipefail
scratch=$1 source=$2
shift 2
rm -rf "$scratch" && mkdir -p "$scratch" && cd "$scratch"
mpirun=("$@")
run() {
  "${mpirun[@]}" -np 2 /usr/bin/python3 "$source/examples/torch/imagenet_resnet.py" --batches-per-allreduce 2 \
    --batch-size 16 --warmup-epochs 1 --base-lr 0.05 --synthetic-samples 128 --fp16-allreduce --epochs "$1"
}
first=$(run 2 2>&1) || { echo "$first"; echo "imagenet_resume: the first run failed"; exit 1; }
echo "$first"
[[ -f checkpoint-2.pth.tar ]] || { echo "imagenet_resume: no checkpoint-2.pth.tar after 2 epochs"; exit 1; }
second=$(run 3 2>&1) || { echo "$second"; echo "imagenet_resume: the resumed run failed"; exit 1; }
echo "$second"
if grep -q "^epoch [12]:" <<<"$second" || ! grep -q "^epoch 3: val loss" <<<"$second"; then
  echo "imagenet_resume: the second run did not resume at epoch 3 alone"
  exit 1
fi
echo "imagenet_resume: trained 2 epochs, resumed at epoch 3"
