"""Every collective of dtrain.torch against an exact reference: each rank can build every rank's
input (the seed, the case and the rank fix it), so each computes the expected result itself.
Integer-valued inputs keep sums exact in every dtype; scale factors are powers of two.
  mpirun -np N python3 collectives_test.py"""
import zlib

import harness
from harness import check, equal, hvd, on_device, raises, torch

DTYPES = [torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32,
          torch.float64]
FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
seed = harness.start()
n, me = hvd.size(), hvd.rank()


def data(case, rank, shape, dtype, small=False):
    g = torch.Generator().manual_seed(zlib.crc32(f"{seed}/{case}/{rank}".encode()))
    low, high = (0, 16) if dtype == torch.uint8 else (-8, 9)
    if small:  # factors of exact products
        low, high = (0, 4) if dtype == torch.uint8 else (-2, 3)
    return torch.randint(low, high, shape, generator=g, dtype=torch.int64).to(dtype)


def everyone(case, shape, dtype, small=False):
    return [data(case, r, shape, dtype, small) for r in range(n)]


def reference(op, inputs, dtype, pre=1.0, post=1.0):
    wide = torch.stack([x.double() * pre for x in inputs])
    if op == hvd.Sum:
        out = wide.sum(0) * post
    elif op == hvd.Min:
        out = wide.min(0).values
    elif op == hvd.Max:
        out = wide.max(0).values
    elif op == hvd.Product:
        out = wide.prod(0) * post
    elif dtype in FLOATING:  # Average: the sum times 1/size, in fp32 (fp64 for fp64), rounded once
        work = torch.float64 if dtype == torch.float64 else torch.float32
        out = (wide.sum(0) * post).to(work) * torch.tensor(1.0 / n, dtype=work)
    else:
        return torch.div(wide.sum(0).long(), n, rounding_mode="floor").to(dtype)
    if dtype == torch.uint8 and op == hvd.Product:
        return out.long().remainder(256).to(dtype)  # uint8 products wrap
    return out.to(dtype)


def test_allreduce():
    shapes = [(0,), (1,), (7919,), (3, 5, 7)]
    for dtype in DTYPES:
        for shape in shapes:
            for op in (hvd.Average, hvd.Sum, hvd.Min, hvd.Max, hvd.Product):
                case = f"allreduce/{dtype}/{shape}/{op}"
                inputs = everyone(case, shape, dtype, small=op == hvd.Product)
                expected = reference(op, inputs, dtype)
                mine = on_device(inputs[me].clone())
                out = hvd.allreduce(mine, op=op, name=case)
                equal(out, expected, case)
                equal(mine, inputs[me], case + ": the input is untouched")
                hvd.allreduce_(mine, op=op, name=case + "/inplace")
                equal(mine, expected, case + " in place")
        if dtype in FLOATING:  # powers of two: the scaled sums stay exact
            case = f"allreduce/scaled/{dtype}"
            inputs = everyone(case, (129,), dtype)
            out = hvd.allreduce(on_device(inputs[me]), op=hvd.Sum, prescale_factor=0.5, postscale_factor=4.0, name=case)
            equal(out, reference(hvd.Sum, inputs, dtype, 0.5, 4.0), case)
    inputs = everyone("allreduce/large", (2**20 + 3,), torch.float32)
    equal(hvd.allreduce(on_device(inputs[me]), op=hvd.Sum, name="large"), reference(hvd.Sum, inputs, torch.float32),
          "allreduce of 2^20+3 float32")
    # Horovod's default op is Average; the deprecated average= still works.
    inputs = everyone("default", (33,), torch.float64)
    equal(hvd.allreduce(inputs[me]), reference(hvd.Average, inputs, torch.float64), "allreduce's default op")
    equal(hvd.allreduce(inputs[me], average=False), reference(hvd.Sum, inputs, torch.float64), "average=False")
    for compression in (hvd.Compression.fp16, hvd.Compression.bf16):
        out = hvd.allreduce(on_device(inputs[me]), op=hvd.Sum, compression=compression, name=f"compressed/{compression.__name__}")
        equal(out, reference(hvd.Sum, inputs, torch.float64), f"allreduce with {compression.__name__}")


def test_async_any_order():
    """Names submitted in a different order on every rank, completed by polling."""
    cases = [(f"async/{i}", DTYPES[i % len(DTYPES)], (i * 37 + 1,)) for i in range(12)]
    order = list(range(len(cases)))
    torch.Generator().manual_seed(seed + me)
    order = order[me % len(order):] + order[:me % len(order)]
    if me % 2:
        order.reverse()
    started = {}
    for i in order:
        name, dtype, shape = cases[i]
        inputs = everyone(name, shape, dtype)
        tensor = on_device(inputs[me].clone())
        handle = hvd.allreduce_async_(tensor, op=hvd.Sum, name=name) if i % 2 else \
            hvd.allreduce_async(tensor, op=hvd.Max, name=name)
        started[i] = (handle, tensor, inputs, hvd.Sum if i % 2 else hvd.Max)
    polls = 0
    while not all(hvd.poll(h) for h, _, _, _ in started.values()):
        polls += 1
    for i, (handle, tensor, inputs, op) in started.items():
        out = hvd.synchronize(handle)
        equal(out, reference(op, inputs, inputs[0].dtype), f"{cases[i][0]} (async, after {polls} polls)")
        check(op != hvd.Sum or out is tensor, f"{cases[i][0]}: allreduce_async_ returns its own tensor")
    groups = [everyone(f"grouped/{k}", (5 + k, 3), torch.float32) for k in range(3)]
    outs = hvd.grouped_allreduce([on_device(g[me]) for g in groups], op=hvd.Sum, name="grouped")
    for k, out in enumerate(outs):
        equal(out, reference(hvd.Sum, groups[k], torch.float32), f"grouped_allreduce {k}")
    tensors = [on_device(g[me].clone()) for g in groups]
    handle = hvd.grouped_allreduce_async_(tensors, op=hvd.Max, name="grouped_")
    outs = hvd.synchronize(handle)
    for k, t in enumerate(tensors):
        equal(t, reference(hvd.Max, groups[k], torch.float32), f"grouped_allreduce_async_ {k}")
        check(outs[k] is t, "grouped_allreduce_async_ returns its own tensors")


def test_allgather_broadcast():
    for dtype in DTYPES:
        for trailing in [(), (3,), (2, 5)]:
            case = f"allgather/{dtype}/{trailing}"
            # rank r contributes r rows (rank 0 none), the first dimension differs between ranks
            inputs = [data(case, r, (r,) + trailing, dtype) for r in range(n)]
            out = hvd.allgather(on_device(inputs[me]), name=case)
            equal(out, torch.cat(inputs), case)
        for root in range(n):
            case = f"broadcast/{dtype}/{root}"
            inputs = everyone(case, (7919,), dtype)
            equal(hvd.broadcast(on_device(inputs[me]), root, name=case), inputs[root], case)
            mine = on_device(inputs[me].clone())
            hvd.broadcast_(mine, root_rank=root, name=case + "/inplace")
            equal(mine, inputs[root], case + " in place")
    handle = hvd.allgather_async(torch.full((2,), me), name="allgather_async")
    hvd.poll(handle)
    equal(hvd.synchronize(handle), torch.arange(n).repeat_interleave(2), "allgather_async")


def test_alltoall_reducescatter():
    for dtype in (torch.int32, torch.float16, torch.float64):
        case = f"alltoall/{dtype}"
        inputs = everyone(case, (3 * n, 2), dtype)
        out = hvd.alltoall(on_device(inputs[me]), name=case)
        equal(out, torch.cat([inputs[r][3 * me:3 * me + 3] for r in range(n)]), case)
        # splits: rank r sends (r + j) % 3 rows to rank j
        splits = [[(r + j) % 3 for j in range(n)] for r in range(n)]
        inputs = [data(case + "/splits", r, (sum(splits[r]), 4), dtype) for r in range(n)]
        out, received = hvd.alltoall(on_device(inputs[me]), splits=splits[me], name=case + "/splits")
        pieces = [torch.split(inputs[r], splits[r])[me] for r in range(n)]
        equal(out, torch.cat(pieces), case + " with splits")
        equal(received, torch.tensor([splits[r][me] for r in range(n)], dtype=torch.int32), case + " received splits")
        for rows in (2 * n, 2 * n + 1):
            for op in (hvd.Sum, hvd.Average, hvd.Max):
                name = f"reducescatter/{dtype}/{rows}/{op}"
                inputs = everyone(name, (rows, 3), dtype)
                whole = reference(op, inputs, dtype)
                counts = [rows // n + (1 if r < rows % n else 0) for r in range(n)]
                begin = sum(counts[:me])
                equal(hvd.reducescatter(on_device(inputs[me]), op=op, name=name), whole[begin:begin + counts[me]], name)


def test_autograd():
    x = data("autograd", me, (4, 3), torch.float64).requires_grad_()
    weights = torch.arange(12, dtype=torch.float64).view(4, 3)
    (hvd.allreduce(x, op=hvd.Sum, name="grad/allreduce") * weights).sum().backward()
    equal(x.grad, weights * n, "gradient through allreduce(Sum): the sum of every rank's upstream gradient")
    x.grad = None
    (hvd.allgather(x, name="grad/allgather") * (me + 1)).sum().backward()
    mean_scale = sum(r + 1 for r in range(n)) / n
    equal(x.grad, torch.full((4, 3), mean_scale, dtype=torch.float64), "gradient through allgather")
    x.grad = None
    (hvd.broadcast(x, 0, name="grad/broadcast") * (me + 1)).sum().backward()
    expected = torch.full((4, 3), mean_scale if me == 0 else 0.0, dtype=torch.float64)
    equal(x.grad, expected, "gradient through broadcast")
    # alltoall: block j of x goes to rank j, which weighs it by j + 1; the gradient comes back in place.
    y = data("autograd/alltoall", me, (2 * n, 3), torch.float64).requires_grad_()
    out = hvd.alltoall(y, name="grad/alltoall")
    (out * (me + 1)).sum().backward()
    expected = torch.arange(1, n + 1, dtype=torch.float64).repeat_interleave(2).view(-1, 1).expand(2 * n, 3)
    equal(y.grad, expected.contiguous(), "gradient through alltoall")


def test_barrier_and_objects():
    hvd.barrier()
    check(hvd.broadcast_object({"rank": me, "list": [1, 2]}, root_rank=n - 1) == {"rank": n - 1, "list": [1, 2]},
          "broadcast_object")
    check(hvd.allgather_object(("rank", me)) == [("rank", r) for r in range(n)], "allgather_object")



def test_join():
    """Rank r has r + 1 steps of work, then joins: step k sums the ranks still working, the joined
    ones adding zeros; the last rank to join is the one with most work."""
    for step in range(me + 1):
        case = f"join/{step}"
        inputs = everyone(case, (1001,), torch.float32)
        out = hvd.allreduce(inputs[me], op=hvd.Sum, name=case)
        equal(out, reference(hvd.Sum, [x for r, x in enumerate(inputs) if r >= step], torch.float32),
              f"{case}: an allreduce while {step} rank(s) have joined")
    check(hvd.join() == n - 1, "join returns the rank that joined last")
    equal(hvd.allreduce(torch.ones(3), op=hvd.Sum, name="after join"), torch.full((3,), float(n)),
          "an allreduce after every rank has joined")
    if n > 1:  # while rank 0 has joined, only all-reduces run: a broadcast fails, naming rank 0
        if me != 0:
            raises(ValueError, "rank(s) 0 have joined", lambda: hvd.broadcast(torch.ones(2), 1, name="while joined"),
                   "a broadcast while a rank has joined")
        last = hvd.join()
        check(last != 0, f"join: rank 0 joined first, not last (got {last})")


def test_topology():
    check(0 <= hvd.local_rank() < hvd.local_size() <= n, "local_rank and local_size")
    check(0 <= hvd.cross_rank() < hvd.cross_size() <= n, "cross_rank and cross_size")
    check(hvd.is_initialized() and hvd.mpi_threads_supported() and hvd.mpi_built() and not hvd.gloo_built(),
          "is_initialized, mpi_threads_supported, mpi_built, gloo_built")
    raises(NotImplementedError, "Adasum", lambda: hvd.allreduce(torch.ones(2), op=hvd.Adasum), "Adasum")
    # libdtrain.so was opened RTLD_GLOBAL, so libmpi's symbols are global, as Open MPI's components
    # (shared objects it opens itself) expect.
    import ctypes
    check(hasattr(ctypes.CDLL(None), "MPI_Comm_rank"), "libmpi's symbols are in the global namespace")


for test in (test_topology, test_allreduce, test_async_any_order, test_allgather_broadcast,
             test_alltoall_reducescatter, test_autograd, test_barrier_and_objects, test_join):
    test()
harness.finish("collectives")
