#!/usr/bin/env python3
"""Where PyTorch's ResNet-50 training step spends GPU time, by kernel kind (torch.profiler, CUDA
activity): the peer's side of bench/results/*/train_summary.md. Synthetic data, bf16 autocast and
channels_last (or fp32 NCHW), SGD with momentum, eager or torch.compile.

  python bench/peers/pytorch_kernel_profile.py --mode compile --batch 256 --json out.json
"""
import argparse
import collections
import json

import torch
import torchvision

KINDS = [  # first match wins; lower-case substrings of kernel names
    ("conv wgrad", ["wgrad"]),
    ("conv dgrad", ["dgrad"]),
    ("conv (cudnn other)", ["cudnn", "xmma", "implicit_convolve", "conv", "cutlass", "sm90_", "nchwtonhwc", "nhwctonchw"]),
    ("gemm", ["gemm", "nvjet", "cublas"]),
    ("triton (fused elementwise/norm)", ["triton"]),
    ("batch norm", ["batch_norm", "bn_"]),
    ("pooling", ["pool"]),
    ("optimizer", ["foreach", "multi_tensor", "sgd"]),
]


def kind_of(name):
    n = name.lower()
    for kind, keys in KINDS:
        if any(k in n for k in keys):
            return kind
    return "other"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--mode", choices=["eager", "compile"], default="compile")
    p.add_argument("--warmup", type=int, default=15)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--json")
    a = p.parse_args()
    torch.backends.cudnn.benchmark = True
    bf16 = a.precision == "bf16"
    layout = torch.channels_last if bf16 else torch.contiguous_format
    model = torchvision.models.resnet50().cuda().to(memory_format=layout)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(a.batch, 3, 224, 224, device="cuda").to(memory_format=layout)
    y = torch.randint(0, 1000, (a.batch,), device="cuda")

    def fwd_bwd():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(model(x), y)
        loss.backward()

    fb = torch.compile(fwd_bwd) if a.mode == "compile" else fwd_bwd

    def step():
        opt.zero_grad(set_to_none=True)
        fb()
        opt.step()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        start.record()
        for _ in range(a.steps):
            step()
        end.record()
        torch.cuda.synchronize()
    step_ms = start.elapsed_time(end) / a.steps
    per_kind = collections.defaultdict(float)
    per_kernel = collections.defaultdict(float)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            us = e.device_time if hasattr(e, "device_time") else e.cuda_time
            per_kind[kind_of(e.name)] += us / 1000.0 / a.steps
            per_kernel[e.name] += us / 1000.0 / a.steps
    out = {
        "mode": a.mode, "precision": a.precision, "batch": a.batch, "step_ms": step_ms,
        "img_per_sec": a.batch * 1000.0 / step_ms,
        "peak_memory_gb": torch.cuda.max_memory_allocated() / 1e9,
        "ms_per_step_by_kind": dict(sorted(per_kind.items(), key=lambda kv: -kv[1])),
        "top_kernels_ms": dict(sorted(per_kernel.items(), key=lambda kv: -kv[1])[:40]),
    }
    print(json.dumps({k: v for k, v in out.items() if k != "top_kernels_ms"}, indent=1))
    for name, ms in list(out["top_kernels_ms"].items())[:25]:
        print(f"{ms:8.3f} ms  {name[:150]}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
