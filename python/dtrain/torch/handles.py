"""Tensors to the C ABI and back: dtypes, pointers, devices, names, and the handles Horovod's
`*_async` functions return.

An operation is a generator: it submits library operations, yields the list of what it waits for,
and when resumed carries on (an all-gather first exchanges shapes, then data) until it returns
its output. Its frame keeps the tensors alive while the library holds their pointers. A handle is
an int that names such a generator; poll() advances it as far as finished work allows and
synchronize() drives it to the end.

CUDA tensors are submitted with DTRAIN_CUDA and the handle of torch.cuda.current_stream(): the
library orders its work after what that stream has queued; on completion dtrain_wait_stream makes
the current stream wait for it, so the host never waits for the GPU.
"""
import ctypes
import itertools
import time

import torch

from dtrain import _library as _c
from dtrain.torch import basics

_DTYPES = {
    torch.uint8: _c.UINT8,
    torch.int8: _c.INT8,
    torch.int32: _c.INT32,
    torch.int64: _c.INT64,
    torch.float16: _c.FLOAT16,
    torch.bfloat16: _c.BFLOAT16,
    torch.float32: _c.FLOAT32,
    torch.float64: _c.FLOAT64,
}
FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def dtype_code(tensor, name):
    code = _DTYPES.get(tensor.dtype)
    if code is None:
        supported = ", ".join(str(t).replace("torch.", "") for t in _DTYPES)
        raise ValueError(f"tensor '{name}': dtype {tensor.dtype} is not supported (supported: {supported})")
    return code


def dense(tensor):
    """Whether the elements fill numel() slots from data_ptr() with no gaps, in the default memory
    format or a channels_last one (channels_last models keep their weights and gradients so)."""
    return (tensor.is_contiguous() or tensor.is_contiguous(memory_format=torch.channels_last)
            or tensor.is_contiguous(memory_format=torch.channels_last_3d))


def wire_buffer(output):
    """The buffer an element-wise collective (all-reduce, broadcast) hands the library for `output`:
    `output` itself when its memory holds the elements in the default (row-major) order, else a
    new tensor in that order, which the caller copies back into `output`. So every rank sends the
    same element at the same offset whatever the memory format of its tensor, and ranks whose
    tensors differ in format (rank 0 channels_last, rank 1 not) still agree, at the price of two
    copies of a channels_last tensor."""
    if output.is_contiguous():
        return output
    return torch.empty_like(output, memory_format=torch.contiguous_format)


def check_tensor(tensor, name, elementwise=False):
    """`elementwise`: any dense memory format will do (dense()); otherwise the default one."""
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"tensor '{name}': expected a torch.Tensor, got {type(tensor).__name__}")
    if not (dense(tensor) if elementwise else tensor.is_contiguous()):
        raise ValueError(f"tensor '{name}': Tensor is required to be contiguous (call .contiguous() first)")
    if tensor.is_sparse:
        raise ValueError(f"tensor '{name}': sparse tensors are not supported (convert with .to_dense())")
    dtype_code(tensor, name)


def pointer(tensor):
    return ctypes.c_void_p(tensor.data_ptr()) if tensor.numel() else None


def device_of(tensor, name):
    """(dtrain_device, stream) for a tensor; a CUDA tensor must be on this rank's GPU."""
    if tensor.device.type == "cpu":
        return _c.HOST, None
    if tensor.device.type != "cuda":
        raise ValueError(f"tensor '{name}': device {tensor.device} is neither CPU nor CUDA")
    if not _c.has("dtrain_wait_stream"):
        raise RuntimeError(f"tensor '{name}' is on {tensor.device}, but {_c.path} has no device buffers "
                           "(dtrain_wait_stream); use a libdtrain.so built with CUDA from a newer dtrain")
    gpu = _c.lib.dtrain_gpu()
    if gpu >= 0 and tensor.device.index != gpu:
        raise ValueError(f"tensor '{name}' is on {tensor.device}, but rank {basics.rank()} uses cuda:{gpu} "
                         "(hvd.local_rank(); call torch.cuda.set_device(hvd.local_rank()) and put tensors there)")
    return _c.CUDA, ctypes.c_void_p(torch.cuda.current_stream(tensor.device).cuda_stream)


class LibOp:
    """One library operation in flight."""
    __slots__ = ("handle", "device")

    def __init__(self, handle, device):
        self.handle, self.device = handle, device


def submit(function, what, *args, device=_c.HOST):
    """Calls dtrain_<function>(*args, &handle); a failure raises at once, naming `what`."""
    handle = ctypes.c_int64(0)
    status = getattr(_c.lib, "dtrain_" + function)(*args, ctypes.byref(handle))
    if status != _c.OK:
        basics.raise_status(status, what)
    return LibOp(handle.value, device)


def _done(op):
    done = ctypes.c_int(0)
    status = _c.lib.dtrain_poll(op.handle, ctypes.byref(done))
    return status != _c.OK or done.value != 0


_SIGNAL_CHECK_S = 0.05


def _block_until_done(op):
    """Host waits block in C (no CPU spent, woken at once when done) but return to the interpreter
    every 50 ms, so it still sees signals (Ctrl-C) while a rank waits for others."""
    if not _c.has("dtrain_wait_for"):
        pause = 20e-6
        while not _done(op):
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)
        return
    done = ctypes.c_int(0)
    while not done.value:
        if _c.lib.dtrain_wait_for(op.handle, _SIGNAL_CHECK_S, ctypes.byref(done)) != _c.OK:
            return  # the handle is gone or dtrain stopped: dtrain_wait reports it


def _finish(op, what):
    """Waits for `op` and releases it."""
    if op.device == _c.CUDA:
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        status = _c.lib.dtrain_wait_stream(op.handle, stream)
    else:
        _block_until_done(op)
        status = _c.lib.dtrain_wait(op.handle)
    if status != _c.OK:
        basics.raise_status(status, what)


class _Pending:
    __slots__ = ("steps", "waiting", "result", "error", "what")

    def __init__(self, steps, what):
        self.steps, self.what = steps, what
        self.waiting, self.result, self.error = [], None, None
        self._advance(None)

    def _advance(self, value):
        try:
            self.waiting = self.steps.send(value) or []
        except StopIteration as stop:
            self.steps, self.waiting, self.result = None, [], stop.value

    def finished(self):
        return self.steps is None

    def step(self, block):
        """Finishes the operations waited on (when done, or at once if `block`) and resumes."""
        while not self.finished():
            if not block and not all(_done(op) for op in self.waiting):
                return
            try:
                for op in self.waiting:
                    _finish(op, self.what)
            except Exception as e:  # noqa: BLE001 (KeyboardInterrupt and the like propagate at once)
                # The operation failed; its other library operations finish (or fail) on their own
                # and are released at shutdown: waiting for them here could wait forever.
                self.steps, self.waiting, self.error = None, [], e
                return
            self._advance(None)


_pending = {}
_next_handle = itertools.count(1)


def start(steps, what):
    """Starts the generator `steps` and returns its handle. Errors in its first part (bad arguments)
    raise here, as Horovod's enqueue does."""
    pending = _Pending(steps, what)
    handle = next(_next_handle)
    _pending[handle] = pending
    return handle


def poll(handle):
    """True once synchronize(handle) would return without waiting."""
    pending = _pending.get(handle)
    if pending is None:
        raise ValueError(f"poll: handle {handle} is unknown or already synchronized")
    try:
        pending.step(block=False)
    except Exception as e:  # noqa: BLE001 (reported by synchronize)
        pending.steps, pending.error = None, e
    return pending.finished()


def synchronize(handle):
    """Waits for the operation and returns its output (Horovod's `hvd.synchronize`)."""
    pending = _pending.pop(handle, None)
    if pending is None:
        return None  # as Horovod: an unknown handle gives None
    pending.step(block=True)
    if pending.error is not None:
        if isinstance(pending.error, (ValueError, basics.DtrainInternalError, NotImplementedError)):
            raise pending.error
        raise basics.DtrainInternalError(f"{pending.what}: {pending.error}") from pending.error
    return pending.result


_counters = {}


def auto_name(kind, name):
    """The name an operation goes under: the caller's, else '<kind>.noname.<n>', the n-th unnamed one
    of its kind on this rank (so ranks that call in the same order agree)."""
    if name is not None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{kind}: name must be a non-empty string, got {name!r}")
        return name
    count = _counters.get(kind, 0)
    _counters[kind] = count + 1
    return f"{kind}.noname.{count}"
