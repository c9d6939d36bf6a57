#!/bin/bash
# Device run at 59f56c5 on one H200. (1) The loader A/B that loader_077006a/ left open (its
# dtrain-bench-data rows were below 2026-11-24's on another machine of this kind): the same
# binary's loader at f2a215f ("base"), at 59f56c5 with the DCT scale picked from all n/8
# ("eighths"), and at 59f56c5 ("pow2": 1/8, 1/4, 1/2, 1 only), rounds interleaved, beside the
# torchvision DataLoader. (2) The plan file: dtrain-train on synthetic data (first process: measures
# and writes ~/.cache/dtrain), then from JPEGs (rebuilds the plans from the file), with
# dtrain-bench-train in the same call; the ConvPlanCache and cuDNN GPU tests.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib
export NCCL_NVLS_ENABLE=0
B=/tmp/b; mkdir -p $B
for f in .carry/bin/*.xz; do (xz -dc "$f" > $B/$(basename "$f" .xz) && chmod +x $B/$(basename "$f" .xz)) & done; wait
{ nvidia-smi -L; echo "nproc $(nproc)"; lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core"; } | tee $OUT/machine.txt
SECONDS=0
$B/dtrain-make-image-tree /tmp/tree --realistic --classes 100 --train-per-class 138 --val-per-class 10 --seed 1 --threads 16 > $OUT/tree.log 2>&1
find /tmp/tree -type f -print0 | xargs -0 cat > /dev/null
echo "tree $SECONDS s" | tee -a $OUT/times.txt
S=$OUT/loader_ab.txt
for round in 1 2 3; do
  for v in base eighths pow2; do
    bin=$B/bd_$v; [ $v = pow2 ] && bin=$B/dtrain-bench-data
    echo "== round $round $v" >> $S
    timeout 60 $bin --data-dir /tmp/tree --loader-threads 1,14 --batches 12 --rounds 1 --clock-probe-seconds 0.5 \
      --metrics-file $OUT/data_${v}_r$round.json 2>&1 | grep -E "^ +(1|14) " >> $S
  done
done
cat $S
timeout 150 /opt/torch/.venv/bin/python bench/peers/torchvision_loader.py --data-dir /tmp/tree --threads 1,14 --batches 12 --rounds 2 \
  --metrics-file $OUT/torchvision_data.json 2>&1 | grep -v "Warning\|warn" | tail -8 | tee $OUT/torchvision.txt
echo "loaders done $SECONDS s" | tee -a $OUT/times.txt
MPI="mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE"
timeout 90 $MPI -np 1 $B/dtrain-bench-train --precision bf16 --batch-per-rank 256 --timing-warmup-steps 10 --steps 30 \
  --metrics-file $OUT/bench_train.json 2>&1 | grep -v " INFO " | tail -1 | tee $OUT/bench_train.txt
RN50="--batch_per_rank 256 --log_every_steps 25 --timing_warmup_steps 5 --max_validation_batches 4"
timeout 120 $MPI -np 1 $B/dtrain-train $RN50 --dataset synthetic --synthetic_samples 20480 --epochs 1 --metrics_file $OUT/synthetic.jsonl > $OUT/synthetic.log 2>&1
echo "synthetic exit $? at $SECONDS s" | tee -a $OUT/times.txt
timeout 120 $MPI -np 1 $B/dtrain-train $RN50 --dataset imagenet --data_dir /tmp/tree --loader_threads 14 --epochs 3 --metrics_file $OUT/jpeg.jsonl > $OUT/jpeg.log 2>&1
echo "jpeg exit $? at $SECONDS s" | tee -a $OUT/times.txt
grep -hE "plans|steps on GPU|step [0-9]+/|epoch [0-9]+:|rror" $OUT/synthetic.log $OUT/jpeg.log | cut -c1-250
ls -la ~/.cache/dtrain/ && head -3 ~/.cache/dtrain/*.txt && wc -l ~/.cache/dtrain/*.txt
cp ~/.cache/dtrain/*.txt $OUT/ 2>/dev/null
timeout 200 $B/dtrain-models-gpu-tests --gtest_filter='ConvPlanCache*:Shapes/CudnnConv2dTest*' > $OUT/conv_gpu_tests.log 2>&1
echo "conv GPU tests exit $? at $SECONDS s: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/conv_gpu_tests.log | tr '\n' ' ')" | tee -a $OUT/times.txt
grep -E "FAILED|Failure" $OUT/conv_gpu_tests.log | head
cd $OUT && tar czf logs.tgz *.log *.jsonl *.json tree.log 2>/dev/null && rm -f *.log *.jsonl *.json
