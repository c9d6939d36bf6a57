"""All-reduce of CPU tensors from PyTorch: dtrain.torch against torch.distributed with gloo, the same
script, the same ranks. Sizes: a 64 MiB fp32 tensor (bandwidth) and a 4-byte one (latency).
Every result is checked against the exact sum (integer-valued inputs).
  mpirun -np 4 python3 bench/torch/cpu_allreduce.py --backend dtrain --json out.json
  mpirun -np 4 python3 bench/torch/cpu_allreduce.py --backend gloo --json out.json
Prints one row per size: median, min and mean time per all-reduce over --iters timed calls after
--warmup, algorithm bandwidth (bytes / time) and bus bandwidth (x 2(n-1)/n, as nccl-tests)."""
import argparse
import json
import os
import statistics
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--backend", choices=["dtrain", "gloo"], required=True)
parser.add_argument("--sizes", default="67108864,4", help="bytes, comma-separated (fp32)")
parser.add_argument("--iters", type=int, default=20, help="timed calls of the largest size (more for small ones)")
parser.add_argument("--warmup", type=int, default=3)
parser.add_argument("--json", default=None)
args = parser.parse_args()
torch.set_num_threads(1)

if args.backend == "dtrain":
    import dtrain.torch as hvd
    hvd.init()
    rank, size = hvd.rank(), hvd.size()

    def allreduce(tensor):
        hvd.allreduce_(tensor, op=hvd.Sum, name="bench")

    def barrier():
        hvd.barrier()
else:
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=size)

    def allreduce(tensor):
        dist.all_reduce(tensor)

    def barrier():
        dist.barrier()

rows = []
for nbytes in (int(s) for s in args.sizes.split(",")):
    count = max(1, nbytes // 4)
    iters = args.iters if nbytes >= 1 << 20 else args.iters * 50
    base = torch.arange(count, dtype=torch.float32).remainder_(1000)
    expected = base * size + size * (size - 1) / 2  # sum over ranks of base + rank
    tensor = torch.empty(count, dtype=torch.float32)
    times, wrong = [], 0
    for i in range(args.warmup + iters):
        torch.add(base, rank, out=tensor)
        barrier()
        start = time.perf_counter()
        allreduce(tensor)
        elapsed = time.perf_counter() - start
        if i >= args.warmup:
            times.append(elapsed)
        wrong += int((tensor != expected).sum())
    median = statistics.median(times)
    row = {"backend": args.backend, "ranks": size, "bytes": count * 4, "iters": iters, "median_s": median,
           "min_s": min(times), "mean_s": statistics.mean(times), "algbw_GBps": count * 4 / median / 1e9,
           "busbw_GBps": count * 4 / median / 1e9 * 2 * (size - 1) / size, "wrong": wrong}
    rows.append(row)

# The slowest rank's view: every rank's wrong count, rank 0 prints.
if rank == 0:
    print(f"{'backend':>8} {'ranks':>5} {'bytes':>10} {'median us':>11} {'min us':>9} {'algbw GB/s':>10} "
          f"{'busbw GB/s':>10} {'#wrong':>6}")
    for r in rows:
        print(f"{r['backend']:>8} {r['ranks']:>5} {r['bytes']:>10} {r['median_s'] * 1e6:>11.1f} "
              f"{r['min_s'] * 1e6:>9.1f} {r['algbw_GBps']:>10.3f} {r['busbw_GBps']:>10.3f} {r['wrong']:>6}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
if args.backend == "gloo":
    # PyTorch 2.11 aborts at exit ("terminate called without an active exception") when a gloo
    # process group is left for the interpreter to tear down.
    dist.destroy_process_group()
if any(r["wrong"] for r in rows):
    raise SystemExit(f"rank {rank}: wrong results")
