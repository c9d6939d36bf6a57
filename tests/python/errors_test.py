"""Bad input to dtrain.torch: a clear ValueError or HorovodInternalError naming what is wrong, on
every rank that should see it, and never a hang or a wrong result.
  mpirun -np 2 python3 errors_test.py"""
import harness
from harness import check, hvd, raises, torch

raises(ValueError, "dtrain has not been initialized; use hvd.init().", hvd.rank, "rank() before init")
raises(ValueError, "dtrain has not been initialized; use hvd.init().", lambda: hvd.allreduce(torch.ones(1)),
       "allreduce before init")
harness.start()
n, me = hvd.size(), hvd.rank()

raises(ValueError, "tensor 'strided': Tensor is required to be contiguous",
       lambda: hvd.allreduce_(torch.ones(4, 4).t(), name="strided"), "a non-contiguous tensor")
raises(ValueError, "dtype torch.bool is not supported", lambda: hvd.allreduce(torch.ones(3, dtype=torch.bool),
                                                                              name="bool"), "an unsupported dtype")
raises(ValueError, "root_rank 7 is not a rank", lambda: hvd.broadcast(torch.ones(2), 7, name="root"), "a bad root")
raises(ValueError, "splits", lambda: hvd.alltoall(torch.ones(3), splits=[5] * n, name="splits"), "bad splits")
raises(NotImplementedError, "Adasum", lambda: hvd.DistributedOptimizer(
    torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=1), op=hvd.Adasum), "Adasum optimizer")
raises(NotImplementedError, "allreduce: op=Adasum is not supported by dtrain; use Average or Sum",
       lambda: hvd.allreduce(torch.ones(2), op=hvd.Adasum, name="adasum"), "Adasum allreduce")
raises(AttributeError, "dtrain.torch has no elastic: elastic training is not supported", lambda: hvd.elastic,
       "hvd.elastic")
# Process sets other than the global one: refused on every rank, naming the ranks, before any communication.
raises(NotImplementedError, "add_process_set([0]): dtrain supports the global process set only",
       lambda: hvd.add_process_set([0]), "add_process_set")
raises(NotImplementedError, "add_process_set([0, 1]): dtrain supports the global process set only",
       lambda: hvd.add_process_set(hvd.ProcessSet([0, 1])), "add_process_set of a ProcessSet")
raises(NotImplementedError, "remove_process_set: dtrain supports the global process set only",
       lambda: hvd.remove_process_set(hvd.global_process_set), "remove_process_set")
raises(NotImplementedError, "process_set of ranks [0]: dtrain supports the global process set only",
       lambda: hvd.allreduce(torch.ones(2), process_set=hvd.ProcessSet([0]), name="subset"), "a process_set argument")

# Two operations of one name in flight on this rank: the second is refused at once. (Rank 0's first
# cannot finish before the others submit theirs, after the barrier.)
if n > 1:
    if me == 0:
        first = hvd.allreduce_async(torch.ones(5), name="twice")
        raises(ValueError, "'twice' is already in flight", lambda: hvd.allreduce_async(torch.ones(5), name="twice"),
               "a name already in flight")
        hvd.barrier()
    else:
        hvd.barrier()
        first = hvd.allreduce_async(torch.ones(5), name="twice")
    check(hvd.synchronize(first).tolist() == [1.0] * 5, "the first of the two")

# One name with another shape on another rank: every rank gets the same error naming both.
if n > 1:
    raises(hvd.HorovodInternalError, "count differs", lambda: hvd.allreduce(torch.ones(10 + me), name="shape"),
           "a name with another shape on another rank")
    check(issubclass(hvd.HorovodInternalError, RuntimeError), "HorovodInternalError is a RuntimeError")
    raises(ValueError, "differ beyond the first dimension",
           lambda: hvd.allgather(torch.ones(2, 3 + me), name="trailing"), "allgather with other trailing dimensions")
    raises(hvd.HorovodInternalError, "dtype differs",
           lambda: hvd.allreduce(torch.ones(4, dtype=torch.float32 if me else torch.float64), name="dtype"),
           "a name with another dtype on another rank")
# A CUDA tensor on another GPU than this rank's.
if harness.DEVICE.type == "cuda" and torch.cuda.device_count() > 1:
    other = (harness.DEVICE.index + 1) % torch.cuda.device_count()
    raises(ValueError, f"is on cuda:{other}, but rank {me} uses", lambda: hvd.allreduce(
        torch.ones(3, device=f"cuda:{other}"), name="other gpu"), "a tensor on another GPU")
# Still usable afterwards.
out = hvd.allreduce(torch.full((3,), float(me)), op=hvd.Sum, name="after errors")
check(out.tolist() == [float(sum(range(n)))] * 3, "an allreduce after the errors")
harness.finish("errors", after_shutdown=lambda: raises(
    hvd.HorovodInternalError, "init: dtrain_init: dtrain was shut down and cannot start again in this process",
    hvd.init, "init after shutdown"))
