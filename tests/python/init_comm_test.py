"""hvd.init(comm=...) with an mpi4py communicator: the world split in two by rank parity, dtrain on
each half (skipped, saying so, without mpi4py).
  mpirun -np 4 python3 init_comm_test.py"""
import sys

try:
    import mpi4py
except ImportError:
    print("skipped: mpi4py is not installed for this interpreter (Debian: python3-mpi4py)")
    sys.exit(77)
mpi4py.rc.thread_level = "multiple"  # dtrain's background thread calls MPI beside the caller's
from mpi4py import MPI  # noqa: E402

import harness  # noqa: E402
from harness import check, hvd, torch  # noqa: E402

world = MPI.COMM_WORLD
half = world.Split(color=world.rank % 2, key=world.rank)
hvd.init(comm=half)
check(hvd.size() == half.size and hvd.rank() == half.rank, f"rank {hvd.rank()} of {hvd.size()} is the half's "
      f"{half.rank} of {half.size}")
members = [r for r in range(world.size) if r % 2 == world.rank % 2]
out = hvd.allreduce(torch.tensor([float(world.rank)]), op=hvd.Sum, name="half")
check(out.item() == float(sum(members)), f"the sum over the half {members}: {out.item()}")
total = len(harness.failures)
hvd.shutdown()
failed = world.allreduce(total)
if world.rank == 0:
    print(f"init_comm: {'all checks passed' if failed == 0 else f'{failed} failure(s)'} on {world.size} rank(s)")
sys.exit(1 if failed else 0)
