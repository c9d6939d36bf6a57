"""Horovod's helpers for starting a job consistently: broadcast_parameters, broadcast_optimizer_state,
broadcast_object and allgather_object."""
import collections
import io
import pickle

import torch

from dtrain.torch import basics
from dtrain.torch.basics import check_process_set, global_process_set
from dtrain.torch.mpi_ops import broadcast_, broadcast_async_, synchronize, allgather

_object_calls = {"broadcast_object": 0, "allgather_object": 0}


def _named_tensors(params):
    if isinstance(params, dict):
        return sorted(params.items())
    if isinstance(params, collections.abc.Iterable):
        items = list(params)
        if all(isinstance(p, tuple) and len(p) == 2 for p in items):
            return items
    raise ValueError("broadcast_parameters: params must be a state_dict or a list of (name, tensor) pairs "
                     "(model.named_parameters())")


def broadcast_parameters(params, root_rank):
    """Overwrites every rank's tensors in `params` (a state_dict, int64 buffers included, or
    named_parameters()) with `root_rank`'s, in place. All are in flight together."""
    ids = []
    for name, p in _named_tensors(params):
        if p is None:
            continue
        if not isinstance(p, torch.Tensor):
            raise ValueError(f"broadcast_parameters: '{name}' is a {type(p).__name__}, not a tensor")
        ids.append(broadcast_async_(p.data if isinstance(p, torch.nn.Parameter) else p, root_rank,
                                    name=f"broadcast.{name}"))
    for handle in ids:
        synchronize(handle)


def _pickled(obj):
    buffer = io.BytesIO()
    pickle.dump(obj, buffer)
    return torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)


def _object_name(kind, name):
    if name is not None:
        return f"{kind}.{name}"
    count = _object_calls[kind]
    _object_calls[kind] = count + 1
    return f"{kind}.noname.{count}"


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """`root_rank`'s `obj` on every rank (pickled; the others' `obj` is ignored). Unnamed calls are
    matched by their order on each rank."""
    check_process_set(process_set)
    name = _object_name("broadcast_object", name)
    if basics.rank() == root_rank:
        data = _pickled(obj)
        length = torch.tensor([data.numel()], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    broadcast_(length, root_rank, name=f"{name}.size")
    if basics.rank() != root_rank:
        data = torch.empty(int(length[0]), dtype=torch.uint8)
    broadcast_(data, root_rank, name=f"{name}.data")
    return pickle.loads(data.numpy().tobytes()) if basics.rank() != root_rank else obj


def allgather_object(obj, name=None, process_set=global_process_set):
    """A list of every rank's `obj`, in rank order (pickled)."""
    check_process_set(process_set)
    name = _object_name("allgather_object", name)
    data = _pickled(obj)
    lengths = allgather(torch.tensor([data.numel()], dtype=torch.int64), name=f"{name}.size")
    everything = allgather(data, name=f"{name}.data").numpy().tobytes()
    out, offset = [], 0
    for length in lengths.tolist():
        out.append(pickle.loads(everything[offset:offset + length]))
        offset += length
    return out


def broadcast_optimizer_state(optimizer, root_rank, model=None):
    """Makes every rank's optimizer state (per-parameter tensors such as momentum buffers, and the
    hyperparameters of each group) `root_rank`'s. Ranks whose state is still empty (no step taken)
    get the root's tensors all the same; the parameters are not touched. `model` is accepted for
    Horovod's signature and not needed."""
    del model
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("broadcast_optimizer_state: cannot broadcast torch.optim.LBFGS state")
    state = optimizer.state_dict()
    # The structure (hyperparameters, which parameters have which state, shapes, dtypes) goes as one
    # object; the tensors go as tensors, so large state never passes through pickle.
    layout = {}
    for index, entries in state["state"].items():
        layout[index] = {k: (("tensor", tuple(v.shape), v.dtype) if torch.is_tensor(v) else ("value", v))
                         for k, v in entries.items()}
    root_groups, root_layout = broadcast_object((state["param_groups"], layout), root_rank,
                                                name="dtrain.optimizer_state")
    devices = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            devices[len(devices)] = p.device
    ids, new_state = [], {}
    for index in sorted(root_layout):
        local = state["state"].get(index, {})
        entries = {}
        for key, (kind, *rest) in sorted(root_layout[index].items()):
            if kind == "value":
                entries[key] = rest[0]
                continue
            shape, dtype = rest
            mine = local.get(key)
            if not (torch.is_tensor(mine) and tuple(mine.shape) == shape and mine.dtype == dtype):
                device = devices.get(index, torch.device("cpu")) if len(shape) else torch.device("cpu")
                mine = torch.empty(shape, dtype=dtype, device=device)
            entries[key] = mine
            ids.append(broadcast_async_(mine, root_rank, name=f"dtrain.optimizer_state.{index}.{key}"))
        new_state[index] = entries
    for handle in ids:
        synchronize(handle)
    optimizer.load_state_dict({"state": new_state, "param_groups": root_groups})


