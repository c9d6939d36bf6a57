"""DistributedOptimizer and the start-of-job helpers against one process with the whole batch.
N ranks with batch B each, after several steps of SGD with momentum, hold the weights of one
process that trained on the N*B samples (float64 to 1e-10, float32 to 1e-5), with
backward_passes_per_step 1 and 2, a gradient_predivide_factor, and the AMP pattern
(synchronize, unscale, step inside skip_synchronize). Also: broadcast_parameters with int64
buffers, broadcast_optimizer_state restoring momentum, the zero_grad AssertionError, SyncBatchNorm
against torch's BatchNorm over the union of the batches, parameters some ranks do not use, and
broadcast_optimizer_state of optimizers that have not stepped.
  mpirun -np N python3 optimizer_test.py"""
import os
import zlib

import harness
from harness import check, equal, hvd, on_device, raises, torch

seed = harness.start()
n, me = hvd.size(), hvd.rank()
BATCH, STEPS = 4, 5


def generator(tag):
    return torch.Generator().manual_seed(zlib.crc32(f"{seed}/{tag}".encode()))


def make_model(dtype):
    torch.manual_seed(seed % 1000)  # the same weights on every rank (broadcast_parameters is tested apart)
    return on_device(torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)).to(dtype))


def batches(dtype):
    g = generator("data")
    return [(on_device(torch.randn(n * BATCH, 5, generator=g, dtype=torch.float64).to(dtype)),
             on_device(torch.randn(n * BATCH, 3, generator=g, dtype=torch.float64).to(dtype))) for _ in range(STEPS)]


def loss_of(model, x, y):
    return torch.nn.functional.mse_loss(model(x), y)


def reference_weights(dtype, data):
    model = make_model(dtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in data:
        optimizer.zero_grad()
        loss_of(model, x, y).backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


def distributed_weights(dtype, data, passes=1, predivide=1.0, amp=False, num_groups=0, per_step=None, bucket_mib=""):
    """`passes` backward passes per step, DistributedOptimizer told `per_step` (default: passes; more
    than passes: step() must reduce what the hooks have not submitted yet, as at an epoch's end);
    `bucket_mib`: DTRAIN_TORCH_BUCKET_MIB while the optimizer is made ("": unset, the default)."""
    model = make_model(dtype)
    if bucket_mib:
        os.environ["DTRAIN_TORCH_BUCKET_MIB"] = bucket_mib
    try:
        optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                             named_parameters=model.named_parameters(),
                                             backward_passes_per_step=per_step or passes,
                                             gradient_predivide_factor=predivide, num_groups=num_groups)
    finally:
        os.environ.pop("DTRAIN_TORCH_BUCKET_MIB", None)
    scale = 1024.0
    for x, y in data:
        optimizer.zero_grad()
        mine = slice(me * BATCH, (me + 1) * BATCH)
        for part in torch.chunk(torch.arange(BATCH), passes):
            loss = loss_of(model, x[mine][part], y[mine][part]) / passes
            (loss * scale if amp else loss).backward()
        if amp:  # Horovod's AMP pattern, with the unscaling GradScaler would do
            optimizer.synchronize()
            for p in model.parameters():
                p.grad.div_(scale)
            with optimizer.skip_synchronize():
                optimizer.step()
        else:
            optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


def test_equivalence():
    for dtype, tolerance in ((torch.float64, 1e-10), (torch.float32, 1e-5)):
        data = batches(dtype)
        expected = reference_weights(dtype, data)
        # Buckets of 0.0002 MiB (209 bytes) cut the model's 4 parameters into 3 (1 + 2 + 1).
        for passes, predivide, amp, groups, per_step, bucket in (
                (1, 1.0, False, 0, 1, "0"), (2, 1.0, False, 0, 2, "0"), (1, 2.0, False, 0, 1, "0"),
                (1, 1.0, True, 0, 1, "0"), (2, 1.0, False, 2, 2, "0"), (2, 1.0, False, 0, 3, "0"),
                (1, 1.0, False, 0, 1, "0.0002"), (2, 1.0, False, 0, 3, "0.0002"), (1, 1.0, False, 0, 1, "25"),
                (1, 1.0, True, 0, 1, "")):
            got = distributed_weights(dtype, data, passes, predivide, amp, groups, per_step, bucket)
            for i, (a, e) in enumerate(zip(got, expected)):
                equal(a, e, f"{dtype} {passes} pass(es), backward_passes_per_step={per_step} gradient_predivide_factor="
                      f"{predivide} amp={amp} num_groups={groups} DTRAIN_TORCH_BUCKET_MIB={bucket!r}: parameter {i} "
                      f"after {STEPS} steps", atol=tolerance)


def test_size_buckets():
    from dtrain.torch import optimizer as opt
    params = [torch.zeros(k) for k in (100, 10, 30, 5, 60, 20)]  # float32: 400, 40, 120, 20, 240, 80 bytes
    index = {id(p): i for i, p in enumerate(params)}

    def cuts(cap, tail):  # for each parameter, the indices of its bucket's parameters
        of = {id(p): bucket for bucket in opt._size_buckets(params, cap, tail) for p in bucket}
        return [[index[id(q)] for q in of[id(p)]] for p in params]
    # From the first parameter on: the tail bucket closed at 50 bytes (400), then buckets closed once
    # they hold 150 (40 + 120, then 20 + 240), then what is left (80).
    got = cuts(150, 50)
    check(got == [[0], [1, 2], [1, 2], [3, 4], [3, 4], [5]], f"size buckets of 150 bytes, tail 50: {got}")
    # A tail larger than the buckets is cut at the bucket size.
    got = cuts(130, 1 << 20)
    check(got == [[0], [1, 2], [1, 2], [3, 4], [3, 4], [5]], f"size buckets of 130 bytes, tail 1 MiB: {got}")
    check(opt._size_buckets(params, 0) is None, "size buckets of 0 bytes: none")
    # Unset: 25 MiB buckets where the job spans nodes, none within one.
    default = opt._bucket_bytes_from_env()
    want = 25 << 20 if hvd.cross_size() > 1 else 0
    check(default == want, f"DTRAIN_TORCH_BUCKET_MIB unset on {hvd.cross_size()} node(s): {default} bytes, not {want}")
    # The variable reaches the optimizer: the test model's 4 parameters in 3 buckets.
    model = make_model(torch.float64)
    os.environ["DTRAIN_TORCH_BUCKET_MIB"] = "0.0002"
    try:
        wrapped = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    finally:
        del os.environ["DTRAIN_TORCH_BUCKET_MIB"]
    sizes = sorted(len(g) for g in {id(g): g for g in wrapped._groups.values()}.values())
    check(sizes == [1, 1, 2], f"DTRAIN_TORCH_BUCKET_MIB=0.0002: buckets of {sizes} parameters")
    for bad in ("lots", "-1", "nan", "inf"):
        os.environ["DTRAIN_TORCH_BUCKET_MIB"] = bad
        try:
            raises(ValueError, f"DTRAIN_TORCH_BUCKET_MIB='{bad}'", lambda: hvd.DistributedOptimizer(
                torch.optim.SGD(params, lr=0.1)), f"DTRAIN_TORCH_BUCKET_MIB={bad}")
        finally:
            del os.environ["DTRAIN_TORCH_BUCKET_MIB"]


def test_sparse_as_dense():
    """A sparse embedding's gradient is averaged as a dense one (sparse_as_dense=True)."""
    torch.manual_seed(seed % 1000)
    embedding = on_device(torch.nn.Embedding(10, 4, sparse=True).double())
    start = embedding.weight.detach().clone()
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(embedding.parameters(), lr=1.0),
                                         named_parameters=embedding.named_parameters(), sparse_as_dense=True)
    embedding(on_device(torch.tensor([me % 10, 3]))).sum().backward()
    optimizer.step()
    expected = start.clone()
    for r in range(n):  # every rank's rows, each row's gradient ones, averaged over the ranks
        for row in (r % 10, 3):
            expected[row] -= 1.0 / n
    equal(embedding.weight, expected, "sparse_as_dense: the embedding after one step", atol=1e-12)


def test_zero_grad_in_flight():
    model = make_model(torch.float32)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters())
    loss_of(model, on_device(torch.ones(2, 5)), on_device(torch.zeros(2, 3))).backward()
    if n > 1:
        raises(AssertionError, "optimizer.zero_grad() was called after loss.backward() but before optimizer.step()",
               optimizer.zero_grad, "zero_grad with reductions in flight")
    optimizer.step()
    optimizer.zero_grad()
    raises(ValueError, "unique", lambda: hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=[("w", p) for p in model.parameters()]),
        "duplicate parameter names")


def test_broadcast_parameters_and_state():
    model = on_device(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4)).double())
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(me + 1.5)
    model[1].num_batches_tracked.fill_(10 * me + 7)
    model[1].running_mean.fill_(me)
    root = n - 1
    hvd.broadcast_parameters(model.state_dict(), root_rank=root)
    for name, t in model.state_dict().items():
        expected = torch.full_like(t, 10 * root + 7 if t.dtype == torch.int64 else
                                   (root if name.endswith("running_mean") else root + 1.5))
        if name.endswith("running_var"):
            expected = torch.ones_like(t)
        equal(t, expected, f"broadcast_parameters: {name}")
    with torch.no_grad():
        model[0].weight.fill_(me + 1.5)
    hvd.broadcast_parameters(model.named_parameters(), root_rank=0)
    equal(model[0].weight, torch.full((4, 3), 1.5, dtype=torch.float64), "broadcast of named_parameters")

    # Momentum: rank 0 has stepped (rank-specific gradients), the others have not.
    model = make_model(torch.float64)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * (me + 1), momentum=0.9)
    if me == 0:
        for _ in range(2):
            optimizer.zero_grad()
            loss_of(model, on_device(torch.ones(2, 5, dtype=torch.float64)),
                    on_device(torch.zeros(2, 3, dtype=torch.float64))).backward()
            optimizer.step()
    root_state = hvd.broadcast_object([optimizer.state[p]["momentum_buffer"] for p in model.parameters()]
                                      if me == 0 else None, root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    for i, p in enumerate(model.parameters()):
        buffer = optimizer.state[p].get("momentum_buffer")
        check(buffer is not None, f"broadcast_optimizer_state: parameter {i} has a momentum buffer")
        if buffer is not None:
            equal(buffer, root_state[i], f"broadcast_optimizer_state: momentum of parameter {i}")
    check(optimizer.param_groups[0]["lr"] == 0.01, "broadcast_optimizer_state: the root's learning rate")

    # Adam: per-parameter step counts and both moments, wrapped in DistributedOptimizer.
    model = make_model(torch.float64)
    adam = torch.optim.Adam(model.parameters(), lr=1e-3 * (me + 1))
    if me == 0:
        loss_of(model, on_device(torch.ones(2, 5, dtype=torch.float64)),
                on_device(torch.zeros(2, 3, dtype=torch.float64))).backward()
        adam.step()
    root_state = hvd.broadcast_object(adam.state_dict()["state"] if me == 0 else None, root_rank=0)
    wrapped = hvd.DistributedOptimizer(adam, named_parameters=model.named_parameters())
    hvd.broadcast_optimizer_state(wrapped, root_rank=0)
    state = wrapped.state_dict()["state"]
    for index, entries in root_state.items():
        for key in ("exp_avg", "exp_avg_sq"):
            equal(state[index][key], entries[key], f"broadcast_optimizer_state: Adam {key} of parameter {index}")
        check(float(state[index]["step"]) == float(entries["step"]), f"Adam step of parameter {index}")
    check(wrapped.param_groups[0]["lr"] == 1e-3, "broadcast_optimizer_state: Adam's learning rate from the root")


def test_unused_parameters():
    """A parameter that only some ranks' forward uses (a branch taken by even ranks, another by odd
    ones, a third by none): every rank still takes part in its all-reduce, with zeros where it has no
    gradient (as in Horovod), so the step is one process's on the mean of all ranks' losses and
    nobody waits for a gradient that never comes."""
    def make():
        torch.manual_seed(seed % 1000 + 1)
        return on_device(torch.nn.ModuleList(torch.nn.Linear(5, 3) for _ in range(3)).double())

    def loss_on(model, r, x, y):
        return loss_of(model[r % 2], x, y)  # model[2] is never used

    data = batches(torch.float64)
    reference = make()
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for x, y in data:
        optimizer.zero_grad()
        parts = [loss_on(reference, r, x[r * BATCH:(r + 1) * BATCH], y[r * BATCH:(r + 1) * BATCH]) for r in range(n)]
        (sum(parts) / n).backward()
        optimizer.step()
    model = make()
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters())
    for x, y in data:
        optimizer.zero_grad()
        loss_on(model, me, x[me * BATCH:(me + 1) * BATCH], y[me * BATCH:(me + 1) * BATCH]).backward()
        optimizer.step()
    for (name, a), e in zip(model.named_parameters(), reference.parameters()):
        equal(a, e, f"unused parameters: {name} after {STEPS} steps", atol=1e-12)
    if n > 1:
        equal(model[2].weight.grad, torch.zeros_like(model[2].weight), "a parameter no rank used: a zero gradient")


def test_fresh_optimizer_state():
    """The start of a Horovod script: broadcast_parameters, then broadcast_optimizer_state of optimizers
    that have not stepped yet (empty state on every rank): the state stays empty, the root's
    hyperparameters arrive, and training then matches one process with the whole batch."""
    data = batches(torch.float64)
    expected = reference_weights(torch.float64, data)
    model = make_model(torch.float64)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(me)  # only the root's weights are right
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1 + me, momentum=0.9),
                                         named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    check(len(optimizer.state) == 0, f"fresh SGD: state after broadcast_optimizer_state {dict(optimizer.state)}")
    check(optimizer.param_groups[0]["lr"] == 0.1, f"fresh SGD: lr {optimizer.param_groups[0]['lr']}, the root's 0.1")
    for x, y in data:
        optimizer.zero_grad()
        loss_of(model, x[me * BATCH:(me + 1) * BATCH], y[me * BATCH:(me + 1) * BATCH]).backward()
        optimizer.step()
    for i, (a, e) in enumerate(zip(model.parameters(), expected)):
        equal(a, e, f"fresh SGD broadcast, then {STEPS} steps: parameter {i}", atol=1e-10)
    adam = torch.optim.Adam(make_model(torch.float64).parameters(), lr=1e-3 * (me + 1))
    hvd.broadcast_optimizer_state(adam, root_rank=0)
    check(len(adam.state) == 0 and adam.param_groups[0]["lr"] == 1e-3, "fresh Adam: empty state, the root's lr")


def test_sync_batch_norm():
    for shape in ((BATCH, 6), (BATCH, 6, 5, 3)):
        g = generator(f"bn/{shape}")
        x_all = on_device(torch.randn((n,) + shape, generator=g, dtype=torch.float64))
        dy_all = on_device(torch.randn((n,) + shape, generator=g, dtype=torch.float64))
        bn = torch.nn.BatchNorm1d(6) if len(shape) == 2 else torch.nn.BatchNorm2d(6)
        bn = on_device(bn.double())
        with torch.no_grad():
            bn.weight.copy_(torch.linspace(0.5, 2, 6))
            bn.bias.copy_(torch.linspace(-1, 1, 6))
        sync = on_device(hvd.SyncBatchNorm(6).double())
        sync.load_state_dict(bn.state_dict())
        x_ref = x_all.reshape((n * BATCH,) + shape[1:]).clone().requires_grad_()
        y_ref = bn(x_ref)
        (y_ref * dy_all.reshape(y_ref.shape)).sum().backward()
        x = x_all[me].clone().requires_grad_()
        y = sync(x)
        (y * dy_all[me]).sum().backward()
        mine = slice(me * BATCH, (me + 1) * BATCH)
        equal(y.detach(), y_ref.detach()[mine], f"SyncBatchNorm {shape}: output", atol=1e-12)
        equal(x.grad, x_ref.grad[mine], f"SyncBatchNorm {shape}: input gradient", atol=1e-12)
        equal(sync.running_mean, bn.running_mean, f"SyncBatchNorm {shape}: running mean", atol=1e-12)
        equal(sync.running_var, bn.running_var, f"SyncBatchNorm {shape}: running variance", atol=1e-12)
        summed = hvd.allreduce(sync.weight.grad, op=hvd.Sum, name=f"bn/{shape}/weight")
        equal(summed, bn.weight.grad, f"SyncBatchNorm {shape}: weight gradient summed over ranks", atol=1e-12)
        sync.eval()
        equal(sync(x_all[me]).detach(), bn.eval()(x_all[me]).detach(), f"SyncBatchNorm {shape}: eval", atol=1e-12)


for test in (test_equivalence, test_size_buckets, test_sparse_as_dense, test_zero_grad_in_flight, test_broadcast_parameters_and_state,
             test_unused_parameters, test_fresh_optimizer_state, test_sync_batch_norm):
    test()
harness.finish("optimizer")
