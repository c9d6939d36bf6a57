#!/usr/bin/env python3
"""The PyTorch peer for dtrain-train on real files: torchvision ResNet-50 trained from a JPEG folder
the way PyTorch users run it. ImageFolder + RandomResizedCrop(224) + RandomHorizontalFlip +
PILToTensor (uint8) in DataLoader workers (pinned memory), normalization on the GPU, bf16 autocast
and channels_last, SGD (momentum 0.9, weight decay 1e-4), cross-entropy. Wall-clock images/s over
the measured steps (the host synchronizes once at the end), so data loading counts, as it does for
dtrain-train; the share of wall time spent waiting for the DataLoader is reported too.

  python bench/peers/pytorch_imagefolder_train.py --data-dir DIR --workers 14 --batch-per-rank 256 --metrics-file out.json
"""
import argparse
import json
import os
import time

import torch
import torchvision
from torchvision import transforms


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data_dir", "--data-dir", required=True, help="DIR/train when it exists, else DIR")
    p.add_argument("--workers", type=int, default=14)
    p.add_argument("--batch-per-rank", "--batch", dest="batch", type=int, default=256)
    p.add_argument("--timing-warmup-steps", "--warmup", dest="warmup", type=int, default=10, help="untimed steps (worker start, cuDNN autotune)")
    p.add_argument("--steps", type=int, default=40, help="measured steps")
    p.add_argument("--metrics-file", "--json", dest="json")
    args = p.parse_args()
    root = os.path.join(args.data_dir, "train") if os.path.isdir(os.path.join(args.data_dir, "train")) else args.data_dir
    data = torchvision.datasets.ImageFolder(root, transforms.Compose([
        transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.PILToTensor()]))
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                                         pin_memory=True, drop_last=True, persistent_workers=True, prefetch_factor=4)
    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda")
    model = torchvision.models.resnet50(num_classes=len(data.classes)).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=device).view(1, 3, 1, 1) * 255
    step, wait, start = 0, 0.0, None
    total = args.warmup + args.steps
    while step < total:
        it = iter(loader)
        while step < total:
            t0 = time.perf_counter()
            try:
                images, labels = next(it)
            except StopIteration:
                break
            if step >= args.warmup:
                wait += time.perf_counter() - t0
            images = images.to(device, non_blocking=True).float().sub_(mean).div_(std).contiguous(
                memory_format=torch.channels_last)
            labels = labels.to(device, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = loss_fn(model(images), labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step == args.warmup:
                torch.cuda.synchronize()
                start = time.perf_counter()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    rate = args.steps * args.batch / seconds
    result = {"peer": "PyTorch ImageFolder training", "img_per_sec": round(rate, 1),
              "data_wait_fraction": round(wait / seconds, 4), "workers": args.workers, "batch": args.batch,
              "images": len(data), "measured_steps": args.steps, "warmup_steps": args.warmup,
              "loss": float(loss), "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "torchvision": torchvision.__version__, "date": time.strftime("%Y-%m-%d", time.gmtime())}
    print(f"PyTorch ResNet-50 bf16 from {root}: {rate:.1f} img/s with {args.workers} workers, "
          f"data wait {100 * wait / seconds:.1f}%, loss {float(loss):.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
