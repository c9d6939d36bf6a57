"""torchvision ResNet-50 training throughput on GPUs, one script for dtrain.torch and for PyTorch's
DDP, so the peers differ only in how gradients are averaged: bf16 autocast, channels_last, SGD with
momentum, synthetic data already on the GPU, batch --batch per GPU. One rank per GPU under mpirun:
  mpirun -np 4 python bench/torch/train_resnet.py --mode dtrain        # DistributedOptimizer
  mpirun -np 4 python bench/torch/train_resnet.py --mode ddp           # DDP (NCCL), eager
  mpirun -np 4 python bench/torch/train_resnet.py --mode ddp-compile   # DDP + torch.compile
  (--mode dtrain-compile: DistributedOptimizer around a torch.compile'd model)
Prints images/s per GPU at the median step after --warmup steps (every step timed between two
torch.cuda.synchronize()), and the loss of the first and last steps (a run that does not learn the
fixed batch is wrong, not fast); rank 0 writes --json."""
import argparse
import json
import os
import statistics
import time

import torch
import torch.nn.functional as F
import torchvision

parser = argparse.ArgumentParser()
parser.add_argument("--mode", choices=["dtrain", "dtrain-compile", "ddp", "ddp-compile"], required=True)
parser.add_argument("--model", default="resnet50")
parser.add_argument("--batch", type=int, default=256)
parser.add_argument("--steps", type=int, default=60, help="timed steps")
parser.add_argument("--warmup", type=int, default=20)
parser.add_argument("--json", default=None)
parser.add_argument("--timeline", default=None,
                    help="dtrain modes: the library's timeline of the timed steps (rank 0 writes it)")
args = parser.parse_args()

if args.mode.startswith("dtrain"):
    import dtrain.torch as hvd
    hvd.init()
    rank, size, local_rank = hvd.rank(), hvd.size(), hvd.local_rank()
else:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    local_rank = int(os.environ["OMPI_COMM_WORLD_LOCAL_RANK"])
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
# The GPU: the rank's index on its host. (With DTRAIN_RANKS_PER_NODE the simulated nodes share one
# host, and hvd.local_rank() counts within a simulated node.)
gpu = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", local_rank))
torch.cuda.set_device(gpu)
if not args.mode.startswith("dtrain"):
    dist.init_process_group("nccl", rank=rank, world_size=size, device_id=torch.device("cuda", gpu))
torch.backends.cudnn.benchmark = True
torch.manual_seed(0)

model = getattr(torchvision.models, args.model)().cuda().to(memory_format=torch.channels_last)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-5)
if args.mode.startswith("dtrain"):
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    step_model = torch.compile(model) if args.mode == "dtrain-compile" else model
else:
    step_model = DistributedDataParallel(model, device_ids=[gpu])
    if args.mode == "ddp-compile":
        step_model = torch.compile(step_model)

g = torch.Generator(device="cuda").manual_seed(rank)
images = torch.randn(args.batch, 3, 224, 224, device="cuda", generator=g).to(memory_format=torch.channels_last)
labels = torch.randint(0, 1000, (args.batch,), device="cuda", generator=g)


def step():
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(step_model(images), labels)
    loss.backward()
    optimizer.step()
    return loss


times, losses = [], []
for i in range(args.warmup + args.steps):
    if i == args.warmup and args.timeline and args.mode.startswith("dtrain"):
        hvd.start_timeline(args.timeline)
    torch.cuda.synchronize()
    start = time.perf_counter()
    loss = step()
    torch.cuda.synchronize()
    if i >= args.warmup:
        times.append(time.perf_counter() - start)
    if i in (0, args.warmup + args.steps - 1):
        losses.append(loss.item())
if args.timeline and args.mode.startswith("dtrain"):
    hvd.stop_timeline()
median = statistics.median(times)
per_gpu = args.batch / median
result = {"mode": args.mode, "model": args.model, "gpus": size, "batch_per_gpu": args.batch, "median_step_s": median,
          "images_per_s_per_gpu": per_gpu, "images_per_s": per_gpu * size, "first_loss": losses[0],
          "last_loss": losses[-1], "torch": torch.__version__,
          "env": {k: os.environ[k] for k in ("DTRAIN_RANKS_PER_NODE", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE")
                  if k in os.environ}}
if args.mode.startswith("dtrain") and hvd.fusion_stats() is not None:
    operations, collectives = hvd.fusion_stats()
    result["fusion"] = {"operations": operations, "collectives": collectives}
if rank == 0:
    if "fusion" in result:
        print(f"dtrain fused {result['fusion']['operations']} named all-reduces into "
              f"{result['fusion']['collectives']} collectives")
    print(f"{args.mode:>14} {args.model} x{size} b{args.batch}: {per_gpu:,.0f} images/s per GPU "
          f"({per_gpu * size:,.0f} total), median step {median * 1e3:.1f} ms, loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
if not losses[-1] < losses[0]:
    raise SystemExit(f"rank {rank}: the loss did not fall ({losses[0]:.3f} -> {losses[-1]:.3f})")
