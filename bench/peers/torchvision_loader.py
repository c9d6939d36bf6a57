#!/usr/bin/env python3
"""The peer of dtrain-bench-data: torchvision's ImageFolder and PyTorch's DataLoader on the same
folder of JPEGs, doing the same work per image as dtrain's loader: decode (Pillow), random-resized
crop to 224, random horizontal flip, uint8 CHW tensor (PILToTensor: no float conversion, no
normalize), batches of 256 in pinned memory.

  python bench/peers/torchvision_loader.py --data_dir DIR --threads 1,2,4,14 --batch 256 --batches 20 --json FILE

Reads DIR/train when it exists, else DIR. One row per worker count T: DataLoader(num_workers=T,
shuffle=True, pin_memory=True, persistent_workers=False, drop_last=True), images/s in total and per
worker, printed as dtrain-bench-data prints them and written as the same JSON.

Warm-up and timing in whole rounds. Each worker makes whole batches, and batch i goes to worker
i mod T, so the workers, started together, deliver batches in bursts of T. Timing from batch 2 to
batch 22 with 14 workers would span one burst-to-burst interval (14 batches of work) but count 20
batches: 43% too fast. So the untimed warm-up is --warmup-batches rounded up to a multiple of T
(the first round, which includes starting the workers), and the timed batches are --batches
rounded up to a multiple of T; both are reported. With T <= 2 nothing changes.
"""
import argparse
import datetime
import json
import os
import platform
import socket
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", "--data_dir", dest="data_dir", required=True,
                   help="ImageNet-layout folder of JPEGs; its train/ split when there is one")
    p.add_argument("--loader-threads", "--threads", dest="threads", default="1,2,4,14", help="comma-separated DataLoader worker counts, one row each")
    p.add_argument("--batch-per-rank", "--batch", dest="batch", type=int, default=256, help="images per batch")
    p.add_argument("--batches", type=int, default=20, help="timed batches per row (rounded up to whole rounds)")
    p.add_argument("--warmup-batches", "--warmup_batches", dest="warmup_batches", type=int, default=2,
                   help="untimed batches per row (rounded up to whole rounds)")
    p.add_argument("--prefetch-batches", "--prefetch", dest="prefetch", type=int, default=None,
                   help="DataLoader prefetch_factor: batches in flight per worker (default: PyTorch's, 2)")
    p.add_argument("--crop", type=int, default=224, help="side of the random-resized crop")
    p.add_argument("--seed", type=int, default=1, help="torch seed (shuffle and augmentation)")
    p.add_argument("--rounds", type=int, default=3,
                   help="passes over the worker counts, interleaved; each row is the median (as dtrain-bench-data)")
    p.add_argument("--metrics-file", "--json", dest="json", help="also write the results to this JSON file")
    args = p.parse_args()
    try:
        args.thread_counts = [int(t) for t in args.threads.split(",")]
    except ValueError:
        p.error(f"--threads {args.threads}: expected a list of worker counts like 1,2,4,14")
    if not args.thread_counts or min(args.thread_counts) < 1:
        p.error(f"--threads {args.threads}: every worker count must be at least 1")
    if args.rounds < 1:
        p.error(f"--rounds {args.rounds}: must be at least 1")
    for name in ("batch", "batches", "crop"):
        if getattr(args, name) < 1:
            p.error(f"--{name} {getattr(args, name)}: must be positive")
    if args.warmup_batches < 0:
        p.error(f"--warmup-batches {args.warmup_batches}: must not be negative")
    if not os.path.isdir(args.data_dir):
        p.error(f"--data_dir {args.data_dir}: not a directory")
    return args


def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"host": socket.gethostname(), "cpu_model": cpu, "online_cores": os.cpu_count(),
            "usable_cores": len(os.sched_getaffinity(0)), "python": platform.python_version()}


def round_up(n, multiple):
    return -(-n // multiple) * multiple


def measure(dataset, args, workers, torch):
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=args.batch, num_workers=workers, shuffle=True, pin_memory=True,
        persistent_workers=False, drop_last=True,
        **({"prefetch_factor": args.prefetch} if args.prefetch else {}))
    warmup = round_up(args.warmup_batches, workers)
    timed = round_up(args.batches, workers)
    epochs_started = 0
    it = iter(loader)

    def take():
        nonlocal it, epochs_started
        try:
            return next(it)
        except StopIteration:
            it = iter(loader)  # a new epoch: the workers start again (persistent_workers=False)
            epochs_started += 1
            return next(it)

    for _ in range(warmup):
        images, _ = take()
        if not images.any():
            sys.exit("a warm-up batch is all zeros")
    epochs_started = 0
    start = time.perf_counter()
    for _ in range(timed):
        images, labels = take()
    seconds = time.perf_counter() - start
    del it  # stop the workers before the next row
    # Checked outside the timing: dtrain-bench-data checks the same things.
    if images.dtype != torch.uint8 or tuple(images.shape) != (args.batch, 3, args.crop, args.crop):
        sys.exit(f"unexpected batch {images.dtype} {tuple(images.shape)}")
    if not images.any():
        sys.exit("the last batch is all zeros")
    checksum = (int(images.sum(dtype=torch.int64)) * 1000003 + int(labels.sum())) & 0xFFFFFFFFFFFFFFFF
    rate = args.batch * timed / seconds
    return {"threads": workers, "img_per_sec": round(rate, 1), "img_per_sec_per_thread": round(rate / workers, 1),
            "seconds": round(seconds, 3), "epochs_started": epochs_started, "warmup_batches": warmup,
            "measured_batches": timed, "last_batch_checksum": f"{checksum:016x}"}


def main():
    args = parse_args()
    import PIL
    import torch
    import torchvision
    from torchvision import transforms

    torch.manual_seed(args.seed)
    split_dir = os.path.join(args.data_dir, "train")
    if not os.path.isdir(split_dir):
        split_dir = args.data_dir
    transform = transforms.Compose([
        transforms.RandomResizedCrop(args.crop),
        transforms.RandomHorizontalFlip(),
        transforms.PILToTensor(),
    ])
    dataset = torchvision.datasets.ImageFolder(split_dir, transform=transform)
    if len(dataset) < args.batch:
        sys.exit(f"--batch {args.batch}: {split_dir} has only {len(dataset)} images")
    m = machine()
    command = " ".join([sys.executable] + sys.argv)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    versions = {"torch": torch.__version__, "torchvision": torchvision.__version__, "pillow": PIL.__version__}
    print(f"# torchvision DataLoader: JPEG -> Pillow decode, RandomResizedCrop({args.crop}), RandomHorizontalFlip, "
          f"PILToTensor -> pinned uint8 CHW batches\n"
          f"# {command}\n"
          f"# {date}, host {m['host']}, {m['cpu_model']}, {m['online_cores']} cores online, {m['usable_cores']} usable\n"
          f"# data: {split_dir}, {len(dataset)} images in {len(dataset.classes)} classes\n"
          f"# batch {args.batch}, prefetch_factor {args.prefetch or 2}, {args.warmup_batches} warm-up + {args.batches} "
          f"timed batches per row, each rounded up to whole rounds of the workers; seed {args.seed}\n"
          f"# torch {versions['torch']}, torchvision {versions['torchvision']}, Pillow {versions['pillow']}, "
          f"CUDA for pin_memory: {torch.cuda.is_available()}\n#")
    print(f"# {'threads':>7} {'img/s':>12} {'img/s/thread':>14} {'% of linear':>12} {'seconds':>9} {'epochs':>7} "
          f"{'warm-up+timed':>14}", flush=True)
    by_count = {w: [] for w in args.thread_counts}
    for r in range(args.rounds):
        for workers in args.thread_counts:
            row = measure(dataset, args, workers, torch)
            print(f"round {r + 1}: {workers} worker(s) {row['img_per_sec']:.1f} img/s", file=sys.stderr, flush=True)
            by_count[workers].append(row)
    rows = []
    for workers in args.thread_counts:
        runs = sorted(by_count[workers], key=lambda x: x["img_per_sec"])
        rates = [x["img_per_sec"] for x in runs]
        k = len(rates)
        median = rates[k // 2] if k % 2 else 0.5 * (rates[k // 2 - 1] + rates[k // 2])
        row = dict(runs[-1])
        row["img_per_sec"] = round(median, 1)
        row["img_per_sec_per_thread"] = round(median / workers, 1)
        row["round_img_per_sec"] = [x["img_per_sec"] for x in by_count[workers]]
        row["linear_percent"] = round(100.0 * row["img_per_sec_per_thread"] / (rows or [row])[0]["img_per_sec_per_thread"], 1)
        rows.append(row)
        print(f"  {row['threads']:7d} {row['img_per_sec']:12.1f} {row['img_per_sec_per_thread']:14.1f} "
              f"{row['linear_percent']:11.1f}% {row['seconds']:9.3f} {row['epochs_started']:7d} "
              f"{str(row['warmup_batches']) + '+' + str(row['measured_batches']):>14}", flush=True)
    print(f"#\n# img/s: the median of {args.rounds} rounds (the counts interleaved). % of linear: img/s per worker "
          "against the first row's.")
    if args.json:
        result = {"peer": "torchvision DataLoader", "rows": rows, "machine": m, "command": command, "date": date,
                  "data_dir": split_dir, "images": len(dataset), "classes": len(dataset.classes), "batch": args.batch,
                  "warmup_batches": args.warmup_batches, "measured_batches": args.batches, "rounds": args.rounds,
                  "prefetch_factor": args.prefetch or 2, "crop": args.crop, "seed": args.seed, "versions": versions}
        with open(args.json + ".tmp", "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
        os.replace(args.json + ".tmp", args.json)


if __name__ == "__main__":
    main()
