"""A dtrain.torch script as a launcher starts it (srun in a Slurm job, dtrain-run, mpirun): the rank,
size and local rank must be the launcher's, and one DistributedOptimizer step must end where one
process with every rank's batch does (float64: exact to rounding).
  launcher_test.py check    the checks above
  launcher_test.py fail     the last rank raises while the others wait in an allreduce (the job must
                            end, naming it)
Which launcher started the rank is read from its environment: Open MPI's mpirun sets
OMPI_COMM_WORLD_RANK, srun sets SLURM_STEP_ID and SLURM_PROCID."""
import os
import sys
import time

import harness
from harness import hvd, torch


def launcher_view():
    """(launcher, rank, size, local rank, ranks on this node) from the environment the launcher gave."""
    env = os.environ
    if "OMPI_COMM_WORLD_RANK" in env:
        return ("mpirun", int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"]),
                int(env["OMPI_COMM_WORLD_LOCAL_RANK"]), int(env["OMPI_COMM_WORLD_LOCAL_SIZE"]))
    if "SLURM_STEP_ID" in env and "SLURM_PROCID" in env:
        tasks_here = int(env["SLURM_STEP_TASKS_PER_NODE"].split(",")[0].split("(")[0])
        return ("srun", int(env["SLURM_PROCID"]), int(env["SLURM_STEP_NUM_TASKS"]), int(env["SLURM_LOCALID"]),
                tasks_here)
    return ("none", 0, 1, 0, 1)


def reference_step(seed, size, model, lr):
    """Parameters after one SGD step on the batches of all `size` ranks, averaged, in one process."""
    reference = torch.nn.Linear(5, 3).double()
    reference.load_state_dict(model.state_dict())
    loss = sum(torch.nn.functional.mse_loss(reference(x), y) for x, y in (batch(seed, r) for r in range(size))) / size
    loss.backward()
    with torch.no_grad():
        return [p - lr * p.grad for p in reference.parameters()]


def batch(seed, rank):
    generator = torch.Generator().manual_seed(seed * 1000 + rank)
    rows = 7 + rank  # uneven batches; each rank's loss is a mean over its own rows, as in training
    return (torch.randn(rows, 5, generator=generator, dtype=torch.float64),
            torch.randn(rows, 3, generator=generator, dtype=torch.float64))


def check(seed):
    launcher, rank, size, local_rank, local_size = launcher_view()
    print(f"launcher_test: rank {hvd.rank()} of {hvd.size()}, local rank {hvd.local_rank()} of {hvd.local_size()}; "
          f"{launcher} says rank {rank} of {size}, local rank {local_rank} of {local_size}", flush=True)
    harness.check(launcher != "none", "started by no launcher this test knows (no OMPI_COMM_WORLD_RANK, no SLURM_STEP_ID)")
    harness.check((hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size()) == (rank, size, local_rank, local_size),
                  f"rank/size/local_rank/local_size {hvd.rank()}/{hvd.size()}/{hvd.local_rank()}/{hvd.local_size()}, "
                  f"{launcher} gave {rank}/{size}/{local_rank}/{local_size}")
    harness.check(hvd.cross_size() == 1 and hvd.cross_rank() == 0, f"one node, but cross_size {hvd.cross_size()}")
    torch.manual_seed(seed)
    model = torch.nn.Linear(5, 3).double()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    lr = 0.1
    expected = reference_step(seed, hvd.size(), model, lr)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr),
                                         named_parameters=model.named_parameters())
    x, y = batch(seed, hvd.rank())
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
    for (name, actual), wanted in zip(model.named_parameters(), expected):
        harness.equal(actual, wanted, f"{name} after one step against one process with every rank's batch",
                      atol=1e-12)
    harness.finish("launcher_test")


seed = harness.start()
if sys.argv[1] == "check":
    check(seed)
elif sys.argv[1] == "fail":
    if hvd.rank() == hvd.size() - 1:
        time.sleep(0.5)  # the others are waiting in the allreduce by now
        raise RuntimeError("a failure on the last rank")
    hvd.allreduce(torch.ones(3), name="never completes")
    print("launcher_test: the allreduce completed, which it cannot", flush=True)
