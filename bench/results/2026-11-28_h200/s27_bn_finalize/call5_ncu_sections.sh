#!/bin/bash
# Device call 5 (1 H200), main 8ca9026: ncu sections (speed of light, occupancy, launch, warp state,
# memory) of batch norm's reduction passes, one step's launches (after one warm-up step), to see
# why the statistics pass reaches 1.2-2.6 TB/s on layers of 13-103 MB where the backward's reads 3.5.
set -u
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 DTRAIN_CUDA_GRAPHS=0
B=/tmp/b; mkdir -p $B; tar xJf .device/s27/p5.tar.xz -C $B
nvidia-smi -L > $OUT/machine.txt
timeout 400 ncu --kernel-name-base function --kernel-name 'regex:^(partial_moments|backward_partials)_kernel$' \
  --launch-skip 106 --launch-count 106 --cache-control none --clock-control none \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
  --csv --page details $B/dtrain-bench-train --precision bf16 --batch-per-rank 256 --timing-warmup-steps 1 --steps 2 \
  > /tmp/ncu_sections.csv 2> /tmp/ncu.err; echo "ncu rc $?"; tail -3 /tmp/ncu.err
wc -l /tmp/ncu_sections.csv; xz -9 -c /tmp/ncu_sections.csv > $OUT/ncu_sections.csv.xz
