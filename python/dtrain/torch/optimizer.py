"""Horovod's DistributedOptimizer: the user's optimizer, whose gradients are averaged over the ranks.

A hook on each parameter fires when backward has accumulated its gradient; after
`backward_passes_per_step` such passes it submits the gradient's all-reduce at once, so the
reductions of the last layers run while backward is still computing the first ones, and the
library fuses the gradients that become ready together into few collectives. step() first waits
for them all (synchronize()), then runs the user's optimizer step.
"""
import contextlib
import os
import warnings

import torch

from dtrain.torch import basics, handles
from dtrain.torch.compression import Compression
from dtrain.torch.mpi_ops import Adasum, Average, _allreduce_steps, _resolve_op, _together

_ZERO_GRAD_IN_FLIGHT = ("optimizer.zero_grad() was called after loss.backward() but before optimizer.step() or "
                        "optimizer.synchronize(). This is prohibited as it can cause a race condition.")


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, groups, sparse_as_dense):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._op = op
        self._sparse_as_dense = sparse_as_dense
        self.backward_passes_per_step = backward_passes_per_step
        if op == Average:
            # The library divides by the size; the rest of the average is split around the sum.
            self._prescale, self._postscale = 1.0 / gradient_predivide_factor, gradient_predivide_factor
        else:
            self._prescale = self._postscale = 1.0
        self._names = _parameter_names(self.param_groups, named_parameters)
        if groups is None:
            groups = _size_buckets(self._params(), _bucket_bytes_from_env())
        self._groups = _parameter_groups(self.param_groups, groups)
        self._handles = {}  # parameter -> (handle, compression context, wire tensor)
        self._delay = {}
        self._grad_hooks = []
        self._synchronized = False
        self._should_synchronize = True
        if basics.size() > 1:
            self._register_hooks()

    def _params(self):
        return [p for group in self.param_groups for p in group["params"] if p.requires_grad]

    def _register_hooks(self):
        for p in self._params():
            self._delay[p] = self.backward_passes_per_step
            if hasattr(p, "register_post_accumulate_grad_hook"):
                self._grad_hooks.append(p.register_post_accumulate_grad_hook(self._make_hook(p, False)))
            else:
                # torch < 2.1: a hook on the gradient's accumulator node runs after p.grad is updated.
                accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
                accumulator.register_hook(self._make_hook(p, True))
                self._grad_hooks.append(accumulator)  # kept alive: the hook lives on the node

    def _make_hook(self, p, node_hook):
        def hook(*_):
            if p in self._handles and self._handles[p][0] is not None:
                if self._delay[p] <= 0:
                    raise AssertionError("Gradients were computed more than backward_passes_per_step times before "
                                         "call to step(). Increase backward_passes_per_step to accumulate "
                                         "gradients locally.")
            assert not p.grad.requires_grad
            assert self._delay[p] > 0
            self._delay[p] -= 1
            if self._delay[p] == 0:
                self._ready(p)
        del node_hook
        return hook

    def _ready(self, p):
        group = self._groups.get(p)
        if group is None:
            self._handles[p] = self._submit([p])[p]
            return
        self._handles[p] = (None, None, None)
        if all(q in self._handles for q in group):
            self._handles.update(self._submit(group))

    def _submit(self, params):
        """Starts the all-reduce of each parameter's gradient (one handle per call, fused by the
        library), returning parameter -> (handle, context, wire tensor)."""
        steps, entries = [], {}
        for p in params:
            grad = p.grad
            if grad.is_sparse:
                if not self._sparse_as_dense:
                    raise ValueError(f"parameter '{self._names[p]}': sparse gradients need sparse_as_dense=True")
                grad = p.grad = grad.to_dense()
            wire, context = self._compression.compress(grad)
            steps.append(_allreduce_steps(wire, wire, f"allreduce.{self._names[p]}", self._op, self._prescale,
                                          self._postscale))
            entries[p] = (context, wire)
        handle = handles.start(_together(steps), "DistributedOptimizer gradients")
        return {p: (handle, context, wire) for p, (context, wire) in entries.items()}

    def synchronize(self):
        """Waits for every gradient's all-reduce (starting those whose hooks have not fired: unused
        parameters, with zeros where there is no gradient) and leaves the averaged gradients in p.grad."""
        if basics.size() == 1:
            self._synchronized = True
            return
        # A parameter this rank's forward did not use (p.grad None) may have a gradient on another
        # rank, which waits for this one's all-reduce: it takes part with zeros, as in Horovod.
        missing = [p for p in self._params() if p not in self._handles]
        for p in missing:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        missing += [p for p, entry in self._handles.items() if entry[0] is None]
        if missing:
            self._handles.update(self._submit(missing))
        finished = {}
        for p, (handle, context, wire) in self._handles.items():
            if handle not in finished:
                finished[handle] = handles.synchronize(handle)
            if context is not None or wire is not p.grad:
                p.grad.copy_(self._compression.decompress(wire, context))
            self._delay[p] = self.backward_passes_per_step
        self._handles.clear()
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """step() inside this block does not synchronize (call synchronize() yourself first: the AMP
        pattern of unscaling the averaged gradients before the step)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() context after "
                              "optimizer.synchronize(). This can cause training slowdown. You may want to consider "
                              "using optimizer.skip_synchronize() context if you use optimizer.synchronize() in your "
                              "code.")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError(_ZERO_GRAD_IN_FLIGHT)
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def _parameter_names(param_groups, named_parameters):
    all_params = [p for group in param_groups for p in group["params"]]
    if named_parameters is None:
        return {p: f"noname.{i}.{j}" for i, group in enumerate(param_groups) for j, p in enumerate(group["params"])}
    named = list(named_parameters)
    if named and not all(isinstance(x, tuple) and len(x) == 2 for x in named):
        raise ValueError("named_parameters should be a sequence of tuples (name, parameter), usually produced by "
                         "model.named_parameters().")
    names = [n for n, _ in named]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"Parameter names in named_parameters must be unique. Found duplicates: {duplicates}")
    by_param = {p: n for n, p in named}
    unnamed = [p for p in all_params if p not in by_param]
    if unnamed:
        raise ValueError(f"named_parameters was specified, but {len(unnamed)} parameter(s) of the optimizer are not "
                         "in it (of shapes " + ", ".join(str(tuple(p.shape)) for p in unnamed[:4]) + ")")
    return by_param


def _parameter_groups(param_groups, groups):
    """parameter -> the parameters reduced with it (groups given as a list of lists, or a count)."""
    params = [p for group in param_groups for p in group["params"] if p.requires_grad]
    if groups is None:
        return {}
    if isinstance(groups, int):
        if groups <= 0:
            return {}
        size = -(-len(params) // groups)
        groups = [params[i:i + size] for i in range(0, len(params), size)]
    out = {}
    for group in groups:
        members = [p for p in group if p.requires_grad]
        for p in members:
            out[p] = members
    return out


_BUCKET_VARIABLE = "DTRAIN_TORCH_BUCKET_MIB"


# Across nodes every collective pays the slow link's latency and the staging through the host: on
# 2 simulated nodes x 2 H100s, ResNet-50 ran 3,741 images/s per GPU with 25 MiB buckets against
# 3,298 with each gradient on its own; within one node the library's own fusion keeps pace as it is
# (3,840 either way), so the buckets start where the job spans nodes.
_MULTI_NODE_BUCKET_MIB = 25


def _bucket_bytes_from_env():
    """DTRAIN_TORCH_BUCKET_MIB: gradients submitted together in buckets of about this many MiB; 0:
    each gradient on its own, as Horovod does; unset: 25 where the job spans nodes, else 0."""
    text = os.environ.get(_BUCKET_VARIABLE, "").strip()
    if not text:
        mib = _MULTI_NODE_BUCKET_MIB if basics.cross_size() > 1 else 0
        return mib << 20
    try:
        mib = float(text)
    except ValueError:
        mib = -1.0
    if not mib >= 0 or mib == float("inf"):
        raise ValueError(f"{_BUCKET_VARIABLE}={text!r}: expected a size in MiB, 0 or more (such as 25)")
    return int(mib * (1 << 20))


_TAIL_BUCKET_BYTES = 1 << 20


def _size_buckets(params, cap_bytes, tail_bytes=_TAIL_BUCKET_BYTES):
    """The parameters in buckets submitted together: consecutive runs cut from the first parameter
    on, the first closed at tail_bytes (at most cap_bytes) and the others at cap_bytes, so each
    bucket is complete at one point of backward and goes as one collective. Backward writes the
    first parameters' gradients last: their bucket is all that cannot overlap backward, so it is
    kept small (as dtrain-train's tail bucket); the last bucket, complete first, takes what is left.
    None: no buckets."""
    if cap_bytes <= 0:
        return None
    buckets, size, limit = [[]], 0, min(tail_bytes, cap_bytes)
    for p in params:
        buckets[-1].append(p)
        size += p.numel() * p.element_size()
        if size >= limit:
            buckets.append([])
            size, limit = 0, cap_bytes
    return [bucket for bucket in buckets if bucket]


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none, backward_passes_per_step=1,
                         op=Average, gradient_predivide_factor=1.0, num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=basics.global_process_set):
    """Wraps `optimizer` so that its step() applies gradients averaged over every rank (Horovod's
    DistributedOptimizer, same arguments). Returns an instance of a subclass of the optimizer's own
    class, built from its param_groups."""
    basics.check_process_set(process_set)
    if op == Adasum:
        raise NotImplementedError("DistributedOptimizer: op=Adasum is not supported by dtrain; use Average")
    op = _resolve_op(op, None, "DistributedOptimizer")
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if not isinstance(backward_passes_per_step, int) or backward_passes_per_step < 1:
        raise ValueError(f"backward_passes_per_step must be a positive integer, got {backward_passes_per_step!r}")
    if num_groups and groups is not None:
        raise ValueError("pass num_groups or groups, not both")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedOptimizer.__dict__))
    wrapped = cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, op,
                  gradient_predivide_factor, groups if groups is not None else (num_groups or None), sparse_as_dense)
    # The state the optimizer already has (momentum, Adam's moments) carries over; Horovod's starts empty.
    wrapped.state.update(optimizer.state)
    return wrapped
