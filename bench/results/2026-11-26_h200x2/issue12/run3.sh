#!/bin/bash
# Third call (a fresh nvidia-h200-x2 machine): the loader rows again with the torchvision peer in the
# same call, 1 and 14 threads, 5 interleaved rounds of 10 batches each (bench/run_data.sh).
set -u
B=build/bin; mkdir -p $B
for f in dtrain-bench-data dtrain-make-image-tree; do xz -dc .carry/bin/$f.xz > $B/$f && chmod +x $B/$f; done
{ nvidia-smi -L; echo "nproc $(nproc)"; lscpu | grep -E "Model name"; } > $OUT/machine3.txt
$B/dtrain-make-image-tree /tmp/tree --realistic --classes 100 --train-per-class 138 --val-per-class 10 --seed 1 --threads $(nproc) > /dev/null 2>&1
BATCHES=10 ROUNDS=5 OUT=/tmp/data timeout 200 bench/run_data.sh /tmp/tree 1,14 > /tmp/run_data.log 2>&1
echo "exit $?"; tail -n 8 /tmp/run_data.log
cp /tmp/data/dtrain_data.json $OUT/dtrain_data_call3.json; cp /tmp/data/torchvision_data.json $OUT/torchvision_data_call3.json
cp /tmp/data/comparison.txt $OUT/comparison_call3.txt; grep "^round" /tmp/data/dtrain_data.log > $OUT/rounds_call3.txt
