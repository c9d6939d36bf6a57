#!/usr/bin/python3
"""An ESTIMATED 1-GPU step profile of ResNet-50 bf16 b256, until bench/run_gpu_profile.sh measures
one: the gradient ranges and the shape of backward (the fraction of it after which each range is
ready) from a CPU profile of the same model (resnet50_cpu_b2_i32.json: dtrain-train --model resnet
--depth 50 --image_size 32 --batch_per_rank 2 --device cpu --profile-steps 3:5), scaled to a
measured 1-GPU rate at b256 (IMG_PER_SEC), split assuming an SGD update of 0.3 ms (25.6 M
parameters, memory-bound) and forward : backward = 1 : 2.
    make_estimate.py IMG_PER_SEC DEVICE > OUT.json
    make_estimate.py 6250 "NVIDIA H100" > h100_b256_estimated.json     (bench/results/2026-11-27_h100x4/)
    make_estimate.py 6220.1 "NVIDIA H200" > h200_b256_estimated_mn.json (2026-11-23_h200x2/multinode_and_loader/mn/)"""
import json
import sys

cpu = json.load(open("resnet50_cpu_b2_i32.json"))
step = 256 / float(sys.argv[1]) * 1e3
optimizer = 0.3
forward = (step - optimizer) / 3
backward = step - optimizer - forward
scale = backward / cpu["backward_ms"]
out = dict(cpu, model="resnet50", precision="bf16", device=f"ESTIMATE for {sys.argv[2]} (make_estimate.py)",
           batch_per_gpu=256, world_size=1, step_ms=round(step, 4), forward_ms=round(forward, 4),
           backward_ms=round(backward, 4), optimizer_ms=optimizer, bucket_bytes=25 << 20,
           gradients=[dict(g, ready_ms=round(g["ready_ms"] * scale, 4)) for g in cpu["gradients"]])
json.dump(out, sys.stdout, indent=1)
print()
