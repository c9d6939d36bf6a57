#!/usr/bin/env bash
# How this folder was made (from the repository root): a CPU profile of ResNet-50 gives the
# gradient ranges and the shape of backward; make_estimate.py scales it to a measured 1-GPU rate
# (ESTIMATED profiles, until bench/run_gpu_profile.sh measures real ones); the tiers are fitted
# from committed all-reduce curves; dtrain-project checks the measured points and projects.
set -euo pipefail
d=bench/results/2026-11-27_cpu/projection_preliminary
t=(/usr/bin/python3 bench/project/dtrain-project)
mn=bench/results/2026-11-23_h200x2/multinode_and_loader/mn
top=$PWD
(cd "$(mktemp -d)" && "$top/build/bin/dtrain-train" --model resnet --depth 50 --image_size 32 --synthetic_samples 64 \
  --batch_per_rank 2 --max-total-steps 5 --max-validation-batches 1 --log_every_steps 0 --loader_threads 1 \
  --device cpu --profile-out "$top/$d/resnet50_cpu_b2_i32.json" --profile-steps 3:5 > /dev/null 2>&1)
(cd "$d" && /usr/bin/python3 make_estimate.py 6250 "NVIDIA H100" > h100_b256_estimated.json &&
  /usr/bin/python3 make_estimate.py 6220.1 "NVIDIA H200" > h200_b256_estimated_mn.json)
rm -f "$d"/machine_*.json
{
  "${t[@]}" --fit bench/results/2026-11-21_h200x2/allreduce_nccl_fp32_np2.json --min-bytes 1048576 --tier intra \
    --update "$d/machine_h100x4_estimated.json" --gpus-per-node 4 \
    --name "4 H100 with simulated nodes (ESTIMATED tiers: NVLink from 2 H200, staged path from 2 H200 simulated nodes)"
  "${t[@]}" --fit "$mn/allreduce_mpi-ring_piece4194304.json" --tier inter --no-shared-link \
    --update "$d/machine_h100x4_estimated.json"
  "${t[@]}" --fit "$mn/allreduce_nccl.json" --tier intra --update "$d/machine_h200x2_mn.json" --gpus-per-node 2 \
    --name "2 H200 as 2 simulated nodes (tiers from the same call's 64 MiB curves)"
  "${t[@]}" --fit "$mn/allreduce_mpi-ring_piece4194304.json" --tier inter --no-shared-link \
    --update "$d/machine_h200x2_mn.json"
} > "$d/fit.txt"
"${t[@]}" --profile "$d/h200_b256_estimated_mn.json" --machine "$d/machine_h200x2_mn.json" \
  --check "$d/points_h200x2_mn.json" > "$d/check_h200x2_mn.txt" || true
"${t[@]}" --profile "$d/h100_b256_estimated.json" --machine "$d/machine_h100x4_estimated.json" \
  --check bench/project/points/h100x4_2026-11-27.json > "$d/check_h100x4.txt" || true
for backend in nccl hierarchical; do
  "${t[@]}" --profile "$d/h100_b256_estimated.json" --machine bench/project/machines/dgx_h100_assumed.json \
    --backend "$backend" --batch-per-gpu 256 --gpus 8,16,32,64,128,256,512,1024,2048,4096 \
    --json "$d/projection_b256_$backend.json" --plot "$d/projection_b256_$backend.png" > "$d/projection_b256_$backend.txt"
done
cat "$d"/check_*.txt "$d"/projection_b256_*.txt
