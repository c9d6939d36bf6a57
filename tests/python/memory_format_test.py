"""All-reduce, broadcast and DistributedOptimizer on tensors dense in a channels_last memory format
(4-D channels_last, 5-D channels_last_3d; Sum, Min, Product, integer Average, fp16 compression)
against exact references: results are right and keep the input's memory format, also when ranks
hold the same tensor in different formats; a conv model in channels_last on N ranks with batch B
each ends with the weights of one process on N*B samples; broadcast_parameters and
broadcast_optimizer_state on such a model. Tensors that are not dense (a transposed view, a
strided slice) still get a ValueError.
  mpirun -np N python3 memory_format_test.py"""
import zlib

import harness
from harness import check, equal, hvd, on_device, raises, torch

seed = harness.start()
n, me = hvd.size(), hvd.rank()
FORMATS = [((3, 5, 7, 11), torch.channels_last), ((2, 3, 4, 5, 6), torch.channels_last_3d),
           ((1, 7919, 1, 2), torch.channels_last), ((0, 3, 2, 2), torch.channels_last)]


def generator(tag):
    return torch.Generator().manual_seed(zlib.crc32(f"{seed}/{tag}".encode()))


def values(shape, rank, tag):
    """Rank `rank`'s integer-valued float64 tensor (sums are exact), the same on every rank."""
    return torch.randint(-1000, 1000, shape, generator=generator(f"{tag}/{rank}")).double()


def formatted(tensor, memory_format):
    return on_device(tensor).contiguous(memory_format=memory_format)


def kept(tensor, memory_format, what):
    check(tensor.numel() == 0 or tensor.is_contiguous(memory_format=memory_format),
          f"{what}: result lost its memory format (strides {tensor.stride()})")


def test_allreduce(shape, fmt, mixed):
    """`mixed`: odd ranks hold their tensors in the default format, even ranks in `fmt`."""
    mine = fmt if not (mixed and me % 2) else torch.contiguous_format
    label = f"{shape} {'mixed formats' if mixed else fmt}"
    expected = sum(values(shape, r, "sum") for r in range(n))
    x = formatted(values(shape, me, "sum"), mine)
    out = hvd.allreduce(x, op=hvd.Sum, name=f"mf.sum.{label}")
    equal(out, expected, f"allreduce {label}")
    kept(out, mine, f"allreduce {label}")
    equal(x, values(shape, me, "sum"), f"allreduce {label}: input unchanged")
    lowest = torch.stack([values(shape, r, "sum") for r in range(n)]).min(0).values
    handle = hvd.allreduce_async(x, op=hvd.Min, name=f"mf.min.{label}")
    equal(hvd.synchronize(handle), lowest, f"allreduce_async Min {label}")
    small = values(shape, me, "prod").remainder(7) + 1  # products of n <= 4 factors < 8: exact
    product = torch.stack([values(shape, r, "prod").remainder(7) + 1 for r in range(n)]).prod(0)
    equal(hvd.allreduce(formatted(small, mine), op=hvd.Product, name=f"mf.prod.{label}"), product,
          f"allreduce Product {label}")
    ints = formatted(values(shape, me, "int").to(torch.int32), mine)
    total = sum(values(shape, r, "int") for r in range(n)).to(torch.int64)
    out = hvd.allreduce(ints, op=hvd.Average, name=f"mf.int.{label}")
    equal(out, torch.div(total, n, rounding_mode="floor").to(torch.int32), f"allreduce int32 Average {label}")
    kept(out, mine, f"allreduce int32 Average {label}")
    address = x.data_ptr()
    hvd.allreduce_(x, op=hvd.Sum, name=f"mf.inplace.{label}")
    equal(x, expected, f"allreduce_ {label}")
    kept(x, mine, f"allreduce_ {label}")
    check(x.data_ptr() == address, f"allreduce_ {label}: not in place")
    small = formatted(values(shape, me, "fp16").remainder(16), mine)  # sums exact in fp16
    out = hvd.allreduce(small, op=hvd.Sum, compression=hvd.Compression.fp16, name=f"mf.fp16.{label}")
    equal(out, sum(values(shape, r, "fp16").remainder(16) for r in range(n)), f"allreduce fp16 {label}")
    kept(out, mine, f"allreduce fp16 {label}")
    root = n - 1
    y = formatted(values(shape, me, "bcast"), mine)
    equal(hvd.broadcast(y, root_rank=root, name=f"mf.bcast.{label}"), values(shape, root, "bcast"),
          f"broadcast {label}")
    hvd.broadcast_(y, root_rank=root, name=f"mf.bcast_.{label}")
    equal(y, values(shape, root, "bcast"), f"broadcast_ {label}")
    kept(y, mine, f"broadcast_ {label}")


def test_grouped():
    shapes = [shape for shape, _ in FORMATS] + [(7919,)]
    tensors = [formatted(values(s, me, f"group{i}"), f) for i, (s, f) in enumerate(FORMATS)]
    tensors.append(on_device(values((7919,), me, "group4")))
    out = hvd.grouped_allreduce(tensors, op=hvd.Sum, name="mf.grouped")
    for i, s in enumerate(shapes):
        equal(out[i], sum(values(s, r, f"group{i}") for r in range(n)), f"grouped_allreduce {s}")
    hvd.grouped_allreduce_(tensors, op=hvd.Sum, name="mf.grouped_")
    for i, (s, f) in enumerate(FORMATS):
        equal(tensors[i], sum(values(s, r, f"group{i}") for r in range(n)), f"grouped_allreduce_ {s}")
        kept(tensors[i], f, f"grouped_allreduce_ {s}")


def test_not_dense():
    base = on_device(torch.zeros(2, 3, 4, 5, dtype=torch.float64))
    for what, t in [("a transposed view", base.transpose(2, 3)), ("a strided slice", base[:, ::2]),
                    ("a dense permutation that is no memory format", torch.zeros(3, 4, 5).permute(1, 0, 2))]:
        for op, call in [("allreduce", lambda: hvd.allreduce(t, name="mf.bad")),
                         ("allreduce_", lambda: hvd.allreduce_(t, name="mf.bad_")),
                         ("broadcast_", lambda: hvd.broadcast_(t, 0, name="mf.badb"))]:
            raises(ValueError, "Tensor is required to be contiguous", call, f"{op} of {what}")


def make_conv(memory_format=torch.channels_last):
    torch.manual_seed(seed % 1000)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Tanh(), torch.nn.Conv2d(8, 4, 3, stride=2),
                                torch.nn.Flatten(), torch.nn.Linear(4 * 2 * 2, 3)).double()
    return on_device(model).to(memory_format=memory_format)


BATCH, STEPS = 3, 4


def test_optimizer():
    g = generator("conv-data")
    data = [(torch.randn(n * BATCH, 3, 8, 8, generator=g, dtype=torch.float64),
             torch.randn(n * BATCH, 3, generator=g, dtype=torch.float64)) for _ in range(STEPS)]
    reference = make_conv(torch.contiguous_format)
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for x, y in data:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(reference(on_device(x)), on_device(y)).backward()
        optimizer.step()
    model = make_conv()
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                         named_parameters=model.named_parameters())
    mine = slice(me * BATCH, (me + 1) * BATCH)
    for x, y in data:
        optimizer.zero_grad()
        x = on_device(x[mine]).contiguous(memory_format=torch.channels_last)
        torch.nn.functional.mse_loss(model(x), on_device(y[mine])).backward()
        check(model[0].weight.grad.is_contiguous(memory_format=torch.channels_last)
              and not model[0].weight.grad.is_contiguous(), "the conv gradient is channels_last (test premise)")
        optimizer.step()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        equal(p, q, f"DistributedOptimizer channels_last: {name} after {STEPS} steps", atol=1e-10)
    kept(model[0].weight, torch.channels_last, "DistributedOptimizer: conv weight")


def test_broadcast_model():
    """Rank r's model from seed r; odd ranks leave theirs in the default format."""
    root = n - 1

    def model_of(rank):
        fmt = torch.channels_last if rank % 2 == 0 else torch.contiguous_format
        model = make_conv(fmt)
        with torch.no_grad():
            for i, p in enumerate(model.parameters()):
                p.copy_(torch.randn(p.shape, generator=generator(f"model{rank}/{i}"), dtype=torch.float64))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        g = generator(f"data{rank}")
        x = on_device(torch.randn(2, 3, 8, 8, generator=g, dtype=torch.float64)).contiguous(memory_format=fmt)
        torch.nn.functional.mse_loss(model(x), on_device(torch.randn(2, 3, generator=g, dtype=torch.float64))).backward()
        optimizer.step()
        return model, optimizer

    expected, expected_optimizer = model_of(root)
    model, optimizer = model_of(me)
    hvd.broadcast_parameters(model.state_dict(), root_rank=root)
    hvd.broadcast_optimizer_state(optimizer, root_rank=root)
    for (name, p), q in zip(model.named_parameters(), expected.parameters()):
        equal(p, q, f"broadcast_parameters channels_last: {name}")
        momentum = optimizer.state[p]["momentum_buffer"]
        equal(momentum, expected_optimizer.state[q]["momentum_buffer"], f"broadcast_optimizer_state: {name}")
    kept(model[0].weight, torch.channels_last if me % 2 == 0 else torch.contiguous_format,
         "broadcast_parameters: conv weight")


for shape, fmt in FORMATS:
    test_allreduce(shape, fmt, mixed=False)
    test_allreduce(shape, fmt, mixed=True)
test_grouped()
test_not_dense()
test_optimizer()
test_broadcast_model()
harness.finish("memory_format")
