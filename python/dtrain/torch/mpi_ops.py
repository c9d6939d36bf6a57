"""Horovod's collectives on dtrain: allreduce, grouped_allreduce, allgather, broadcast, alltoall,
reducescatter, barrier, join, each with Horovod's `_` (in place) and `_async` forms and defaults.
allreduce, allgather, broadcast and alltoall are autograd functions, as Horovod's are.

What the library does not do itself is done here around it: Average of integer tensors (sum, then
floor division), Product (all-gather, then the product), all-gathers whose first dimensions differ
(the shapes are exchanged first), uneven alltoall splits and reducescatter rows.
"""
import ctypes
import warnings

import torch

from dtrain import _library as _c
from dtrain.torch import basics, handles
from dtrain.torch.basics import check_process_set, global_process_set
from dtrain.torch.compression import Compression
from dtrain.torch.handles import poll, synchronize  # noqa: F401 (part of the API)

# Horovod's values of its reduce ops.
Average, Sum, Adasum, Min, Max, Product = 0, 1, 2, 3, 4, 5
_LIBRARY_OP = {Sum: _c.OP_SUM, Average: _c.OP_AVERAGE, Min: _c.OP_MIN, Max: _c.OP_MAX}
_OP_NAMES = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max", Product: "Product"}


def _resolve_op(op, average, where):
    if average is not None:
        if op is not None:
            raise ValueError(f"{where}: pass op or the deprecated average, not both")
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed", DeprecationWarning)
        return Average if average else Sum
    op = Average if op is None else op
    if op == Adasum:
        raise NotImplementedError(f"{where}: op=Adasum is not supported by dtrain; use Average or Sum")
    if op not in _OP_NAMES:
        raise ValueError(f"{where}: op={op!r} is not one of Average, Sum, Min, Max, Product")
    return op


def _scale(tensor, factor):
    if factor != 1.0:
        tensor.mul_(factor)


# --- allreduce ------------------------------------------------------------------------------------
def _allreduce_steps(tensor, output, name, op, prescale, postscale):
    """Reduces `tensor` into `output` (the same tensor in place). A generator (handles.py)."""
    handles.check_tensor(tensor, name, elementwise=True)
    if output is not tensor:
        handles.check_tensor(output, name, elementwise=True)
    wire = handles.wire_buffer(output)
    if wire is not tensor:
        wire.copy_(tensor)
    floating = tensor.dtype in handles.FLOATING
    device, stream = handles.device_of(tensor, name)
    if op == Product:
        _scale(wire, prescale)
        gathered = yield from _allgather_steps(wire.reshape(1, -1), name)
        wide = torch.float64 if floating else tensor.dtype
        wire.copy_(gathered.to(wide).prod(0).to(tensor.dtype).view_as(wire))
        _scale(wire, postscale)
    else:
        integer_average = op == Average and not floating
        library_op = _c.OP_SUM if integer_average else _LIBRARY_OP[op]
        p = handles.pointer(wire)
        lib_op = handles.submit("allreduce", f"allreduce '{name}'", name.encode(), p, p, wire.numel(),
                                handles.dtype_code(tensor, name), library_op, float(prescale), float(postscale),
                                device, stream, device=device)
        yield [lib_op]
        if integer_average:
            wire.copy_(torch.div(wire, basics.size(), rounding_mode="floor"))
    if wire is not output:
        output.copy_(wire)
    return output


def _allreduce_async(tensor, output, average, name, op, prescale_factor, postscale_factor, process_set):
    check_process_set(process_set)
    op = _resolve_op(op, average, "allreduce")
    name = handles.auto_name("allreduce", name)
    return handles.start(_allreduce_steps(tensor, output, name, op, prescale_factor, postscale_factor),
                         f"allreduce '{name}'")


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    """Starts reducing a copy of `tensor` over the ranks; synchronize(handle) returns the result."""
    output = torch.empty_like(tensor)  # keeps a dense tensor's memory format
    return _allreduce_async(tensor, output, average, name, op, prescale_factor, postscale_factor, process_set)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    """Starts reducing `tensor` in place."""
    return _allreduce_async(tensor, tensor, average, name, op, prescale_factor, postscale_factor, process_set)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set):
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor, process_set))


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor):
        ctx.args = (average, op, prescale_factor, postscale_factor)
        return synchronize(allreduce_async(tensor, average, name, op, prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        average, op, prescale_factor, postscale_factor = ctx.args
        grad = allreduce(grad_output.contiguous(), average=average, op=op, prescale_factor=prescale_factor,
                         postscale_factor=postscale_factor)
        return grad, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """The tensor reduced over the ranks (op defaults to Average); `tensor` is not modified.
    Gradients flow through it."""
    check_process_set(process_set)
    compressed, context = compression.compress(tensor)
    reduced = _Allreduce.apply(compressed, average, name, op, prescale_factor, postscale_factor)
    return compression.decompress(reduced, context)


def _together(generators):
    """Runs operation generators side by side: each submits before any is waited for, so their
    library operations are ready together (and fused). Returns their outputs in order."""
    results, waiting = [None] * len(generators), {}

    def advance(i):
        try:
            waiting[i] = generators[i].send(None) or []
        except StopIteration as stop:
            results[i] = stop.value
            waiting.pop(i, None)

    for i in range(len(generators)):
        advance(i)
    while waiting:
        yield [op for ops in waiting.values() for op in ops]
        for i in list(waiting):
            advance(i)
    return results


def _grouped_async(tensors, outputs, average, name, op, prescale_factor, postscale_factor, process_set):
    check_process_set(process_set)
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise ValueError("grouped_allreduce: tensors must be a non-empty list of tensors")
    op = _resolve_op(op, average, "grouped_allreduce")
    base = handles.auto_name("grouped_allreduce", name)
    outputs = outputs or [torch.empty_like(t) for t in tensors]
    steps = [_allreduce_steps(t, o, f"{base}.{i}", op, prescale_factor, postscale_factor)
             for i, (t, o) in enumerate(zip(tensors, outputs))]
    return handles.start(_together(steps), f"grouped_allreduce '{base}'")


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                            process_set=global_process_set):
    return _grouped_async(tensors, None, average, name, op, prescale_factor, postscale_factor, process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                             process_set=global_process_set):
    return _grouped_async(tensors, list(tensors), average, name, op, prescale_factor, postscale_factor, process_set)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set):
    """allreduce of each tensor, submitted together; gradients flow through it."""
    base = handles.auto_name("grouped_allreduce", name)
    if any(t.requires_grad for t in tensors) and torch.is_grad_enabled():
        return [allreduce(t, average, f"{base}.{i}", compression, op, prescale_factor, postscale_factor, process_set)
                for i, t in enumerate(tensors)]
    compressed = [compression.compress(t) for t in tensors]
    reduced = synchronize(grouped_allreduce_async([c for c, _ in compressed], average, base, op, prescale_factor,
                                                  postscale_factor, process_set))
    return [compression.decompress(r, context) for r, (_, context) in zip(reduced, compressed)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor, postscale_factor,
                                                process_set))


# --- allgather ------------------------------------------------------------------------------------
def _exchange_rows(tensor, name, extra=()):
    """Every rank's [rows, elements per row, *extra] (one all-gather of int64s): a generator."""
    rows = tensor.shape[0]
    per_row = 1
    for d in tensor.shape[1:]:
        per_row *= d
    mine = torch.tensor([rows, per_row, *extra], dtype=torch.int64)
    width = mine.numel()
    everyone = torch.empty(width * basics.size(), dtype=torch.int64)
    op = handles.submit("allgather", f"allgather '{name}'", f"{name}#shape".encode(), handles.pointer(mine), width,
                        handles.pointer(everyone), everyone.numel(), None, _c.INT64, _c.HOST, None)
    yield [op]
    table = everyone.view(basics.size(), width)
    differing = [r for r in range(basics.size()) if table[r, 1] != per_row and table[r, 0] > 0 and rows > 0]
    if differing:
        shapes = ", ".join(f"rank {r}: {int(table[r, 1])}" for r in range(basics.size()))
        raise ValueError(f"allgather '{name}': the tensors differ beyond the first dimension (elements per row: "
                         f"{shapes}); only the first dimension may differ between ranks")
    return table


def _allgather_steps(tensor, name):
    handles.check_tensor(tensor, name)
    if tensor.dim() == 0:
        raise ValueError(f"allgather '{name}': the tensor needs at least one dimension (use tensor.view(1))")
    device, stream = handles.device_of(tensor, name)
    table = yield from _exchange_rows(tensor, name)
    total_rows = int(table[:, 0].sum())
    output = tensor.new_empty((total_rows,) + tuple(tensor.shape[1:]))
    op = handles.submit("allgather", f"allgather '{name}'", name.encode(), handles.pointer(tensor), tensor.numel(),
                        handles.pointer(output), output.numel(), None, handles.dtype_code(tensor, name), device,
                        stream, device=device)
    yield [op]
    return output


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts concatenating every rank's `tensor` along the first dimension (which may differ)."""
    check_process_set(process_set)
    name = handles.auto_name("allgather", name)
    return handles.start(_allgather_steps(tensor, name), f"allgather '{name}'")


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name):
        ctx.rows = tensor.shape[0]
        return synchronize(allgather_async(tensor, name))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output.contiguous(), op=Average)
        rows = synchronize(allgather_async(torch.tensor([ctx.rows], dtype=torch.int64)))
        offset = int(rows[:basics.rank()].sum())
        return grad.narrow(0, offset, ctx.rows), None


def allgather(tensor, name=None, process_set=global_process_set):
    """Every rank's `tensor` concatenated along the first dimension; gradients flow through it."""
    check_process_set(process_set)
    return _Allgather.apply(tensor, name)


# --- broadcast ------------------------------------------------------------------------------------
def _broadcast_steps(tensor, output, root_rank, name):
    handles.check_tensor(tensor, name, elementwise=True)
    if output is not tensor:
        handles.check_tensor(output, name, elementwise=True)
    if not isinstance(root_rank, int) or not 0 <= root_rank < basics.size():
        raise ValueError(f"broadcast '{name}': root_rank {root_rank!r} is not a rank of 0..{basics.size() - 1}")
    wire = handles.wire_buffer(output)
    if wire is not tensor:
        wire.copy_(tensor)
    device, stream = handles.device_of(tensor, name)
    op = handles.submit("broadcast", f"broadcast '{name}'", name.encode(), handles.pointer(wire), wire.numel(),
                        handles.dtype_code(tensor, name), root_rank, device, stream, device=device)
    yield [op]
    if wire is not output:
        output.copy_(wire)
    return output


def _broadcast_async(tensor, output, root_rank, name, process_set):
    check_process_set(process_set)
    name = handles.auto_name("broadcast", name)
    return handles.start(_broadcast_steps(tensor, output, root_rank, name), f"broadcast '{name}'")


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    return _broadcast_async(tensor, torch.empty_like(tensor), root_rank, name,
                            process_set)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    return _broadcast_async(tensor, tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name):
        ctx.root_rank = root_rank
        return synchronize(broadcast_async(tensor, root_rank, name))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output.contiguous(), op=Average)
        if basics.rank() != ctx.root_rank:
            grad = grad * 0
        return grad, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """`root_rank`'s tensor on every rank; `tensor` is not modified. Gradients flow through it."""
    check_process_set(process_set)
    return _Broadcast.apply(tensor, root_rank, name)


# --- alltoall -------------------------------------------------------------------------------------
def _even_splits(rows, n):
    return [rows // n + (1 if r < rows % n else 0) for r in range(n)]


def _alltoall_steps(tensor, splits, name):
    handles.check_tensor(tensor, name)
    if tensor.dim() == 0:
        raise ValueError(f"alltoall '{name}': the tensor needs at least one dimension")
    n, rows = basics.size(), tensor.shape[0]
    device, stream = handles.device_of(tensor, name)
    code = handles.dtype_code(tensor, name)
    if splits is None and rows % n == 0:
        output = torch.empty_like(tensor, memory_format=torch.contiguous_format)
        op = handles.submit("alltoall", f"alltoall '{name}'", name.encode(), handles.pointer(tensor),
                            handles.pointer(output), tensor.numel() // n, code, device, stream, device=device)
        yield [op]
        return output, torch.full((n,), rows // n, dtype=torch.int32)
    sends = _even_splits(rows, n) if splits is None else [int(s) for s in torch.as_tensor(splits).reshape(-1)]
    if len(sends) != n or min(sends) < 0 or sum(sends) != rows:
        raise ValueError(f"alltoall '{name}': splits {sends} must hold {n} non-negative row counts summing to the "
                         f"first dimension {rows}")
    # Every rank learns every rank's splits, then blocks are padded to the largest and sent evenly.
    table = yield from _exchange_rows(tensor, name, sends)
    matrix = table[:, 2:]
    block = int(matrix.max())
    per_row = tensor.numel() // rows if rows else int(table[:, 1].max())
    padded = tensor.new_zeros((n, block * per_row))
    for j, piece in enumerate(torch.split(tensor.reshape(rows, per_row), sends)):
        padded[j, :piece.numel()] = piece.reshape(-1)
    received = torch.empty_like(padded)
    op = handles.submit("alltoall", f"alltoall '{name}'", name.encode(), handles.pointer(padded),
                        handles.pointer(received), block * per_row, code, device, stream, device=device)
    yield [op]
    me = basics.rank()
    counts = [int(matrix[r, me]) for r in range(n)]
    pieces = [received[r, :counts[r] * per_row] for r in range(n)]
    output = torch.cat(pieces).reshape((sum(counts),) + tuple(tensor.shape[1:]))
    return output, torch.tensor(counts, dtype=torch.int32)


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts sending rows `splits[j]` of `tensor` to rank j (equal parts without splits);
    synchronize returns (output, received_splits)."""
    check_process_set(process_set)
    name = handles.auto_name("alltoall", name)
    return handles.start(_alltoall_steps(tensor, splits, name), f"alltoall '{name}'")


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name):
        output, received = synchronize(alltoall_async(tensor, splits, name))
        ctx.received = received
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, _):
        grad, _ = synchronize(alltoall_async(grad_output.contiguous(), ctx.received))
        return grad, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Rows scattered to the ranks and gathered from them; returns the output, and with `splits`
    also the rows received from each rank (Horovod's two forms)."""
    check_process_set(process_set)
    output, received = _Alltoall.apply(tensor, splits, name)
    return output if splits is None else (output, received)


# --- reducescatter --------------------------------------------------------------------------------
def _reducescatter_steps(tensor, name, op, prescale, postscale):
    handles.check_tensor(tensor, name)
    if tensor.dim() == 0:
        raise ValueError(f"reducescatter '{name}': the tensor needs at least one dimension")
    if op not in (Average, Sum, Min, Max):
        raise ValueError(f"reducescatter '{name}': op must be Average, Sum, Min or Max")
    n, rows, me = basics.size(), tensor.shape[0], basics.rank()
    floating = tensor.dtype in handles.FLOATING
    work = tensor.clone() if prescale != 1.0 else tensor
    _scale(work, prescale)
    if rows % n != 0:
        # Uneven rows: reduce everything, keep this rank's rows (the first ranks hold one more).
        whole = yield from _allreduce_steps(work, torch.empty_like(work), name, op, 1.0, 1.0)
        counts = _even_splits(rows, n)
        output = whole.narrow(0, sum(counts[:me]), counts[me]).clone()
    else:
        device, stream = handles.device_of(tensor, name)
        output = tensor.new_empty((rows // n,) + tuple(tensor.shape[1:]))
        library_op = _c.OP_SUM if (op == Average and not floating) else _LIBRARY_OP[op]
        lib_op = handles.submit("reducescatter", f"reducescatter '{name}'", name.encode(), handles.pointer(work),
                                handles.pointer(output), output.numel(), handles.dtype_code(tensor, name), library_op,
                                device, stream, device=device)
        yield [lib_op]
        if op == Average and not floating:
            output.copy_(torch.div(output, n, rounding_mode="floor"))
    _scale(output, postscale)
    return output


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0):
    check_process_set(process_set)
    op = _resolve_op(op, None, "reducescatter")
    name = handles.auto_name("reducescatter", name)
    return handles.start(_reducescatter_steps(tensor, name, op, prescale_factor, postscale_factor),
                         f"reducescatter '{name}'")


def reducescatter(tensor, name=None, compression=Compression.none, op=Average, process_set=global_process_set,
                  prescale_factor=1.0, postscale_factor=1.0):
    """The reduction over ranks of `tensor`, this rank's rows of it (rows split as evenly as they
    go, the first ranks holding one more)."""
    compressed, context = compression.compress(tensor)
    reduced = synchronize(reducescatter_async(compressed, name, op, process_set, prescale_factor, postscale_factor))
    return compression.decompress(reduced, context)


# --- barrier and join -----------------------------------------------------------------------------
def barrier(process_set=global_process_set):
    """Returns once every rank has called it."""
    check_process_set(process_set)
    name = handles.auto_name("barrier", None)

    def steps():
        yield [handles.submit("barrier", "barrier", name.encode())]

    synchronize(handles.start(steps(), "barrier"))


def join(device=-1):
    """This rank has no more data: until every rank has joined, it contributes zeros to the others'
    all-reduces. Returns the rank that joined last."""
    del device  # zeros are made by the library, on the host
    if not _c.has("dtrain_join"):
        if basics.size() == 1:
            return 0
        raise NotImplementedError(f"join: {_c.path} has no dtrain_join; use a newer libdtrain.so")
    last = ctypes.c_int(-1)

    def steps():
        yield [handles.submit("join", "join", ctypes.byref(last))]
        return last.value

    return synchronize(handles.start(steps(), "join"))
