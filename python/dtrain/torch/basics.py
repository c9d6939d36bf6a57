"""Life cycle, topology, errors and what the build holds: Horovod's `hvd.init()` family on dtrain.

A rank that ends by an uncaught exception (KeyboardInterrupt included) ends the whole job: once
init() has run, sys.excepthook prints the traceback with the rank named and then aborts MPI, since
the other ranks may be waiting for this one in a collective and would otherwise wait forever.
A process that ends normally shuts dtrain down at exit (collective, as Horovod's atexit does).
"""
import atexit
import sys

from dtrain import _library as _c


class DtrainInternalError(RuntimeError):
    """An operation failed in the library (ranks disagreed on a name, a stall, MPI failed)."""


HorovodInternalError = DtrainInternalError  # the name Horovod scripts catch

NOT_INITIALIZED = "dtrain has not been initialized; use hvd.init()."


class ProcessSet:
    """Horovod's process sets: dtrain has the global one only (every rank of init's communicator)."""

    def __init__(self, ranks=None):
        self.ranks = ranks
        self.process_set_id = 0

    def size(self):
        return size()

    def rank(self):
        return rank()


global_process_set = ProcessSet()


def check_process_set(process_set):
    if process_set is not global_process_set:
        ranks = getattr(process_set, "ranks", process_set)
        raise NotImplementedError(f"process_set of ranks {list(ranks) if ranks is not None else None}: dtrain "
                                  "supports the global process set only (process_set=global_process_set)")


def add_process_set(process_set):
    """Horovod's dynamic process sets: refused, naming the ranks (dtrain reduces over every rank)."""
    ranks = getattr(process_set, "ranks", process_set)
    raise NotImplementedError(f"add_process_set({list(ranks) if ranks is not None else None}): dtrain supports the "
                              "global process set only (process_set=global_process_set)")


def remove_process_set(process_set):
    """The global process set cannot be removed, and there is no other."""
    del process_set
    raise NotImplementedError("remove_process_set: dtrain supports the global process set only, which stays")


def raise_status(status, what):
    """Turns a dtrain_status into the exception Horovod raises for it."""
    text = f"{what}: {_c.last_error()}"
    if status == _c.NOT_INITIALIZED:
        raise ValueError(NOT_INITIALIZED + f" ({text})")
    if status == _c.INVALID_ARGUMENT:
        raise ValueError(text)
    raise DtrainInternalError(text)


def check(status, what):
    if status != _c.OK:
        raise_status(status, what)


_initialized_here = False
_previous_excepthook = None


def init(comm=None, process_sets=None):
    """Starts dtrain on every rank of `comm` (an mpi4py communicator; None: MPI_COMM_WORLD). A second
    call does nothing, as in Horovod."""
    global _initialized_here
    if process_sets not in (None, [], "dynamic") and process_sets:
        raise NotImplementedError("dtrain supports the global process set only (init(process_sets=None))")
    if _c.lib.dtrain_is_initialized():
        return
    if comm is None:
        _check_start(_c.lib.dtrain_init(), "init")
    elif isinstance(comm, (list, tuple)):
        raise NotImplementedError("init(comm=<list of ranks>): pass an mpi4py communicator of those ranks instead")
    else:
        from mpi4py import MPI
        _check_start(_c.lib.dtrain_init_comm(MPI._handleof(comm)), "init(comm)")
    _initialized_here = True
    _install_excepthook()
    # Registered now, after the script's imports: exit handlers run last-registered first, so dtrain
    # shuts down before mpi4py (imported earlier) finalizes MPI.
    atexit.register(_shutdown_at_exit)


def _check_start(status, what):
    """check() for init: a failed start is no "not initialized; use hvd.init()", which the caller just did."""
    if status != _c.OK:
        raise (ValueError if status == _c.INVALID_ARGUMENT else DtrainInternalError)(f"{what}: {_c.last_error()}")


def shutdown():
    """Collective: finishes what every rank submitted and stops dtrain (it cannot start again)."""
    if _c.lib.dtrain_is_initialized():
        check(_c.lib.dtrain_shutdown(), "shutdown")


def is_initialized():
    return bool(_c.lib.dtrain_is_initialized())


def _topology(function):
    value = function()
    if value < 0:
        raise ValueError(NOT_INITIALIZED)
    return value


def size():
    return _topology(_c.lib.dtrain_size)


def rank():
    return _topology(_c.lib.dtrain_rank)


def local_size():
    return _topology(_c.lib.dtrain_local_size)


def local_rank():
    return _topology(_c.lib.dtrain_local_rank)


def cross_size():
    return _topology(_c.lib.dtrain_cross_size)


def cross_rank():
    return _topology(_c.lib.dtrain_cross_rank)


def is_homogeneous():
    """Every node runs the same number of ranks."""
    sizes = [local_size()]
    from dtrain.torch.functions import allgather_object
    return len(set(allgather_object(sizes[0], name="dtrain.is_homogeneous"))) == 1


def mpi_threads_supported():
    # dtrain_init refuses MPI without MPI_THREAD_MULTIPLE, so a running dtrain always has it.
    _topology(_c.lib.dtrain_size)
    return True


def mpi_enabled():
    return True


def mpi_built():
    return True


def gloo_enabled():
    return False


def gloo_built():
    return False


def nccl_built():
    return cuda_built()


def cuda_built():
    return bool(_c.has("dtrain_cuda_built") and _c.lib.dtrain_cuda_built())


def rocm_built():
    return False


def ddl_built():
    return False


def ccl_built():
    return False


def start_timeline(file_path, mark_cycles=False):
    """Records every operation to `file_path` (Chrome tracing JSON). `mark_cycles` is accepted and
    ignored."""
    del mark_cycles
    if not _c.has("dtrain_timeline_start"):
        raise NotImplementedError(f"start_timeline: {_c.path} has no timeline (dtrain_timeline_start); "
                                  "use a newer libdtrain.so")
    check(_c.lib.dtrain_timeline_start(str(file_path).encode()), "start_timeline")


def stop_timeline():
    if not _c.has("dtrain_timeline_stop"):
        raise NotImplementedError(f"stop_timeline: {_c.path} has no timeline (dtrain_timeline_stop)")
    check(_c.lib.dtrain_timeline_stop(), "stop_timeline")


def fusion_stats():
    """(named operations run, collectives they ran as) since init: how much the library fused. Not in
    Horovod; None where the library cannot say."""
    if not _c.has("dtrain_fusion_stats"):
        return None
    import ctypes
    operations, collectives = ctypes.c_int64(0), ctypes.c_int64(0)
    check(_c.lib.dtrain_fusion_stats(ctypes.byref(operations), ctypes.byref(collectives)), "fusion_stats")
    return operations.value, collectives.value


def _abort_on_uncaught(exc_type, exc, tb):
    running = _c.lib.dtrain_is_initialized() and _c.lib.dtrain_size() > 1
    if running:
        sys.stderr.write(f"dtrain: rank {_c.lib.dtrain_rank()} of {_c.lib.dtrain_size()}: uncaught "
                         f"{exc_type.__name__}; ending every rank of the job:\n")
    _previous_excepthook(exc_type, exc, tb)
    if running:
        sys.stderr.flush()
        if _c.has("dtrain_abort"):
            _c.lib.dtrain_abort(1)
        import os
        os._exit(1)  # MPI is not running (or this library cannot abort): end this process at least


def _install_excepthook():
    global _previous_excepthook
    if _previous_excepthook is None:
        _previous_excepthook = sys.excepthook
        sys.excepthook = _abort_on_uncaught


def _shutdown_at_exit():
    if _c.lib.dtrain_is_initialized():
        _c.lib.dtrain_shutdown()
