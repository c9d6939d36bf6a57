"""The step-time model of dtrain-project: compute from the profiles at the batch per GPU asked,
the gradient buckets the engine would cut at the bucket sizes asked (body, tail, first), each bucket's all-reduce started when backward has
written it and the previous one is done (one comm stream), the step ending when backward and the
last bucket are both done, then the optimizer."""
import math
from dataclasses import dataclass

from bucket_plan import plan_cuts
from collectives import COMPONENTS, allreduce
from inputs import InputError


@dataclass
class Compute:
    batch: float
    forward: float
    backward: float
    optimizer: float
    ranges: list  # [(offset, bytes, ready)]


def _between(x, x1, y1, x2, y2):
    return y1 + (y2 - y1) * (x - x1) / (x2 - x1)


def _at_batch(b, points):
    """A time at batch b from (batch, time) points measured: linear between the two neighbours;
    above the largest, linear from the two largest; below the smallest, linear from the two
    smallest but kept between proportional-to-batch and the smallest's own time (a smaller batch
    never takes longer, nor less than its share). One point: proportional to the batch."""
    points = sorted(points)
    if len(points) == 1:
        (b1, t1), = points
        return t1 * b / b1
    for (b1, t1), (b2, t2) in zip(points, points[1:]):
        if b1 <= b <= b2:
            return _between(b, b1, t1, b2, t2)
    if b > points[-1][0]:
        (b1, t1), (b2, t2) = points[-2], points[-1]
        return max(_between(b, b1, t1, b2, t2), t2)
    (b1, t1), (b2, t2) = points[0], points[1]
    return min(max(_between(b, b1, t1, b2, t2), t1 * b / b1), t1)


def compute_at(profiles, batch):
    """The compute of one GPU at `batch` images from profiles of the same model."""
    first = profiles[0]
    for p in profiles[1:]:
        if [(o, n) for o, n, _ in p.ranges] != [(o, n) for o, n, _ in first.ranges]:
            raise InputError(f"{p.path}: its gradient ranges differ from {first.path}'s (another model?)")
    fwd = _at_batch(batch, [(p.batch, p.forward) for p in profiles])
    bwd = _at_batch(batch, [(p.batch, p.backward) for p in profiles])
    # The update touches every parameter once, whatever the batch: the nearest profile's.
    nearest = min(profiles, key=lambda p: abs(math.log(p.batch / batch)))
    ranges = []
    for i, (offset, size, _) in enumerate(first.ranges):
        ready = _at_batch(batch, [(p.batch, p.ranges[i][2]) for p in profiles])
        ranges.append((offset, size, min(ready, bwd)))
    return Compute(batch, fwd, bwd, nearest.optimizer, ranges)


def buckets(ranges, bucket_bytes, tail_bytes=0, first_bytes=0, element_bytes=4):
    """[(bytes, ready)] of the buckets the engine cuts the flat buffer into (bucket_plan.py, as
    comm/gradient_sync/bucket_plan.cc): a bucket sends every element between its cuts and is ready
    when the last range in it is (the gaps between ranges, never reported, hold nothing back)."""
    elements = [(o // element_bytes, (o + n) // element_bytes, t) for o, n, t in ranges]
    cuts = plan_cuts(max(e for _, e, _ in elements), max(1, bucket_bytes // element_bytes),
                     tail_bytes // element_bytes, first_bytes // element_bytes, [(b, e) for b, e, _ in elements])
    out = []
    for lo, hi in zip(cuts, cuts[1:]):
        ready = max((t for b, e, t in elements if b < hi and e > lo and e > b), default=0.0)
        out.append(((hi - lo) * element_bytes, ready))
    return out


@dataclass
class Layout:
    nodes: int
    gpus_per_node: int
    backend: str
    wire: str
    bucket_bytes: int
    batch: float
    tail_bytes: int = 1 << 20  # the engine's default (--tail-bucket-mib 1)
    first_bytes: int = 0

    @property
    def gpus(self):
        return self.nodes * self.gpus_per_node


@dataclass
class Step:
    layout: Layout
    compute: Compute
    seconds: float
    exposed: float  # communication after backward ended
    comm: float  # every bucket's all-reduce, overlapped or not
    parts: dict  # the communication's seconds by component
    bound: str

    @property
    def per_gpu(self):
        return self.layout.batch / self.seconds

    @property
    def total(self):
        return self.per_gpu * self.layout.gpus


def overlap(bucket_list, cost_of):
    """The end of the last all-reduce, from backward's start, and the summed costs: one stream,
    each bucket starting when it is ready and the previous one is done."""
    end, parts = 0.0, {c: 0.0 for c in COMPONENTS}
    for size, ready in bucket_list:
        cost = cost_of(size)
        end = max(end, ready) + cost.total
        for c in COMPONENTS:
            parts[c] += cost.parts[c]
    return end, parts


def project(profiles, machine, layout):
    if layout.gpus_per_node > machine.gpus_per_node:
        raise InputError(f"layout: {layout.gpus_per_node} GPUs per node, but machine {machine.path} has "
                         f"{machine.gpus_per_node}")
    if layout.nodes < 1:
        raise InputError(f"layout: node count {layout.nodes}: must be at least 1")
    if layout.batch < 1:
        raise InputError(f"layout: batch per GPU {layout.batch:g} at {layout.gpus} GPUs: must be at least 1")
    c = compute_at(profiles, layout.batch)
    comm_end, parts = 0.0, {k: 0.0 for k in COMPONENTS}
    if layout.gpus > 1:
        comm_end, parts = overlap(buckets(c.ranges, layout.bucket_bytes, layout.tail_bytes, layout.first_bytes),
                                  lambda n: allreduce(layout.backend, layout.nodes, layout.gpus_per_node, n,
                                                      machine, layout.wire))
    exposed = max(0.0, comm_end - c.backward)
    seconds = c.forward + c.backward + exposed + c.optimizer
    comm = sum(parts.values())
    # The step is bound by communication once what backward cannot hide is a visible share of it.
    bound = "compute" if exposed < 0.02 * seconds else max(parts, key=parts.get)
    return Step(layout, c, seconds, exposed, comm, parts, bound)


def layout_for(machine, gpus, backend, wire, bucket_bytes, batch, tail_bytes=1 << 20, first_bytes=0):
    """gpus on whole nodes of the machine (fewer than a node: one node of that many)."""
    if gpus < 1:
        raise InputError(f"layout: GPU count {gpus}: must be at least 1")
    local = min(gpus, machine.gpus_per_node)
    if gpus % local:
        raise InputError(f"layout: {gpus} GPUs do not fill nodes of {machine.gpus_per_node} GPUs")
    return Layout(gpus // local, local, backend, wire, bucket_bytes, batch, tail_bytes, first_bytes)
