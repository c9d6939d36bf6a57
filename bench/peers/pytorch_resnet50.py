#!/usr/bin/env python3
"""The PyTorch peer for dtrain-bench-train: torchvision ResNet-50 training steps on synthetic
ImageNet-shaped data (224x224, 1000 classes), measured the way dtrain measures itself: CUDA events
around each step, warm-up steps excluded, median step time, images/s per GPU and in total, peak
GPU memory. SGD (momentum 0.9, weight decay 1e-4), cross-entropy.

  python bench/peers/pytorch_resnet50.py --precision bf16 --batch 256 --mode eager --json out.json
  torchrun --nproc_per_node 2 bench/peers/pytorch_resnet50.py --precision bf16 --batch 256   # DDP over NCCL

bf16: autocast to bfloat16 and channels_last (fp32 master weights), as PyTorch users run it.
fp32: NCHW fp32 with PyTorch's defaults (cuDNN may use TF32 for convolutions; --no-tf32 turns it off).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torchvision


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch-per-rank", "--batch", dest="batch", type=int, default=256, help="images per GPU per step")
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--timing-warmup-steps", "--warmup", dest="warmup", type=int, default=20, help="untimed steps (compile time included)")
    p.add_argument("--steps", type=int, default=50, help="measured steps")
    p.add_argument("--no-tf32", action="store_true", help="fp32: keep cuDNN and cuBLAS off TF32")
    p.add_argument("--metrics-file", "--json", dest="json", help="write the result here (rank 0)")
    return p.parse_args()


def main():
    args = parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    if world > 1:
        dist.init_process_group("nccl")
    torch.backends.cudnn.benchmark = True
    if args.no_tf32:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False

    bf16 = args.precision == "bf16"
    layout = torch.channels_last if bf16 else torch.contiguous_format
    model = torchvision.models.resnet50().cuda().to(memory_format=layout)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    images = torch.randn(args.batch, 3, 224, 224, device="cuda").to(memory_format=layout)
    labels = torch.randint(0, 1000, (args.batch,), device="cuda")

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()

    run = torch.compile(step) if args.mode == "compile" else step
    started = time.time()
    for _ in range(args.warmup):
        run()
    torch.cuda.synchronize()
    warmup_s = time.time() - started
    torch.cuda.reset_peak_memory_stats()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(args.steps)]
    for begin, end in events:
        begin.record()
        run()
        end.record()
    torch.cuda.synchronize()
    step_ms = statistics.median(b.elapsed_time(e) for b, e in events)
    per_gpu = args.batch / (step_ms / 1000.0)
    result = {
        "model": "resnet50",
        "framework": f"pytorch {torch.__version__} {args.mode}" + (" DDP" if world > 1 else ""),
        "precision": args.precision,
        "layout": "nhwc" if bf16 else "nchw",
        "batch_per_gpu": args.batch,
        "world_size": world,
        "gpu_name": torch.cuda.get_device_name(),
        "img_per_sec_total": per_gpu * world,
        "img_per_sec_per_gpu": per_gpu,
        "step_ms_median": step_ms,
        "efficiency": None,
        "peak_mem_bytes": torch.cuda.max_memory_allocated(),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
        "warmup_steps": args.warmup,
        "measured_steps": args.steps,
        "warmup_seconds": round(warmup_s, 1),
        "tf32": (not args.no_tf32) and not bf16,
        "command": " ".join(sys.argv),
    }
    if rank == 0:
        print(f"{result['framework']:<34} {args.precision} bs {args.batch} x {world}: "
              f"{per_gpu:8.1f} img/s per GPU, {per_gpu * world:9.1f} total, step {step_ms:.1f} ms, "
              f"peak {result['peak_mem_bytes'] / 2**30:.1f} GiB, reserved {result['peak_reserved_bytes'] / 2**30:.1f} GiB",
              flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
