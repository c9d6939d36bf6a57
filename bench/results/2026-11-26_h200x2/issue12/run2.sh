#!/bin/bash
# Second call on the same warm nvidia-h200-x2 machine, right after run.sh: dtrain-bench-data alone,
# 1 and 14 threads, 5 interleaved rounds of 20 batches (run.sh's loader rows came at 84.8% of linear
# beside a clock ceiling of 85.5%; this repeats ours with more rounds; no peer in this call).
set -u
B=build/bin; mkdir -p $B
[ -x $B/dtrain-bench-data ] || { xz -dc .carry/bin/dtrain-bench-data.xz > $B/dtrain-bench-data; chmod +x $B/dtrain-bench-data; }
[ -d /tmp/tree/train ] || { xz -dc .carry/bin/dtrain-make-image-tree.xz > /tmp/mk && chmod +x /tmp/mk && \
  /tmp/mk /tmp/tree --realistic --classes 100 --train-per-class 138 --val-per-class 10 --seed 1 --threads $(nproc) > /dev/null 2>&1; }
find /tmp/tree/train -type f -print0 | xargs -0 cat > /dev/null
timeout 150 $B/dtrain-bench-data --data-dir /tmp/tree --loader-threads 1,14 --batch-per-rank 256 --batches 20 --rounds 5 \
  --metrics-file $OUT/dtrain_data_rounds5.json 2>&1 | tee $OUT/dtrain_data_rounds5.txt
