"""Horovod's PyTorch API on dtrain: `import dtrain.torch as hvd` in place of `import horovod.torch as
hvd`. docs/python.md lists what is supported, what differs and what is new."""
from dtrain.torch.basics import (HorovodInternalError, DtrainInternalError, ProcessSet, add_process_set, ccl_built,
                                 cross_rank, cross_size, cuda_built, ddl_built, fusion_stats, global_process_set,
                                 gloo_built, gloo_enabled, init, is_homogeneous, is_initialized, local_rank,
                                 local_size, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built, rank,
                                 remove_process_set, rocm_built, shutdown, size, start_timeline, stop_timeline)
from dtrain.torch.compression import Compression
from dtrain.torch.functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                                    broadcast_parameters)
from dtrain.torch.mpi_ops import (Adasum, Average, Max, Min, Product, Sum, allgather, allgather_async, allreduce,
                                  allreduce_, allreduce_async, allreduce_async_, alltoall, alltoall_async, barrier,
                                  broadcast, broadcast_, broadcast_async, broadcast_async_, grouped_allreduce,
                                  grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_, join, poll,
                                  reducescatter, reducescatter_async, synchronize)
from dtrain.torch.optimizer import DistributedOptimizer
from dtrain.torch.sync_batch_norm import SyncBatchNorm

__all__ = [name for name in dir() if not name.startswith("_")]

# Horovod names dtrain does not have: the AttributeError says why and what to use instead.
_ABSENT = {
    "elastic": "elastic training is not supported (dtrain runs a fixed set of MPI ranks; a preempted job "
               "resumes from its checkpoint instead)",
    "sparse_allreduce_async": "sparse all-reduce is not supported; DistributedOptimizer(sparse_as_dense=True) "
                              "reduces sparse gradients as dense ones",
}


def __getattr__(name):
    if name in _ABSENT:
        raise AttributeError(f"dtrain.torch has no {name}: {_ABSENT[name]} (docs/python.md, What differs)")
    raise AttributeError(f"module 'dtrain.torch' has no attribute '{name}'")
