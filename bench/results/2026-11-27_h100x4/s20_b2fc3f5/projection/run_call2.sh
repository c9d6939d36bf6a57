#!/bin/bash
# Session 20 call 2 (x4): dtrain-project's GPU inputs (bench/run_gpu_profile.sh): profiles at b400/256/50/16, then train.
set -u; SECONDS=0
mkdir -p /tmp/d; [ -x /tmp/d/bin/dtrain-bench-train ] || tar xJf .device/payload.tar.xz -C /tmp/d
{ nvidia-smi -L; echo "nproc $(nproc)"; lscpu | grep -i "model name"; } > $OUT/machine.txt 2>&1
P=/tmp/prof; mkdir -p $P
sed -i 's/for b in 400 256 128 64 50 32 16; do/for b in ${PROFILE_BATCHES:-400 256 128 64 50 32 16}; do/' bench/run_gpu_profile.sh
export DTRAIN_PLAN_CACHE=/tmp/plans
PROFILE_BATCHES="400 256 50 16" BIN=/tmp/d/bin OUT=$P timeout 270 bash bench/run_gpu_profile.sh profiles > $P/run_profiles.txt 2>&1
echo "profiles rc $? secs $SECONDS" >> $OUT/summary.txt
BIN=/tmp/d/bin OUT=$P timeout $((585 - SECONDS)) bash bench/run_gpu_profile.sh train > $P/run_train.txt 2>&1
echo "train rc $? secs $SECONDS" >> $OUT/summary.txt
cat $P/steps.txt >> $OUT/summary.txt
tar czf $OUT/prof.tgz --exclude='*.bin' -C /tmp prof
cat $OUT/summary.txt; ls $P
