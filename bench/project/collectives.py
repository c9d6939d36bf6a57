"""The all-reduce cost models of dtrain-project: seconds for one all-reduce of n bytes per rank,
split into what bounds it (latency or bandwidth, inside a node or between nodes).

A tier is an alpha-beta link: alpha seconds per message step, beta seconds per byte (1/beta is
the tier's bus bandwidth, what dtrain-bench-allreduce's busbw tends to for large messages). The
intra tier is one GPU's link inside a node; the inter tier is the node's link to the network,
which all of its GPUs share (its bandwidth is the node's, every NIC together).
"""
import math
from dataclasses import dataclass, field

COMPONENTS = ("intra latency", "intra bandwidth", "inter latency", "inter bandwidth")


@dataclass(frozen=True)
class Tier:
    alpha: float  # seconds per step
    beta: float  # seconds per byte

    @property
    def bandwidth(self):
        return 1.0 / self.beta


@dataclass
class Cost:
    parts: dict = field(default_factory=lambda: {c: 0.0 for c in COMPONENTS})

    def add(self, component, seconds):
        self.parts[component] += seconds
        return self

    def plus(self, other):
        out = Cost()
        for c in COMPONENTS:
            out.parts[c] = self.parts[c] + other.parts[c]
        return out

    @property
    def total(self):
        return sum(self.parts.values())


def ring(p, n, tier, where="intra"):
    """Ring all-reduce of n bytes over p ranks on one tier: 2(p-1) steps of alpha, each rank
    sending 2(p-1)/p of the data."""
    cost = Cost()
    if p <= 1 or n <= 0:
        return cost
    cost.add(where + " latency", 2 * (p - 1) * tier.alpha)
    cost.add(where + " bandwidth", 2 * (p - 1) / p * n * tier.beta)
    return cost


def ring_across_nodes(nodes, local, n, intra, inter):
    """One ring through every GPU of `nodes` nodes of `local` GPUs (NCCL's ring, dtrain's flat
    mpi-ring). Every step all ranks send at once, so a step lasts as long as its slowest hop: the
    one that leaves the node (alpha of the inter tier; its n/p bytes go through the node's link,
    which the crossing of every ring shares)."""
    p = nodes * local
    if nodes <= 1:
        return ring(p, n, intra, "intra")
    cost = Cost()
    cost.add("inter latency", 2 * (p - 1) * inter.alpha)
    per_step = n / p
    intra_step, inter_step = per_step * intra.beta, per_step * inter.beta
    where = "inter" if inter_step >= intra_step else "intra"
    cost.add(where + " bandwidth", 2 * (p - 1) * max(intra_step, inter_step))
    return cost


def nccl_tree(nodes, local, n, intra, inter, bandwidth_fraction):
    """NCCL's double binary tree: a chain through the node's GPUs, a tree of depth log2(nodes)
    between nodes, reduce up and broadcast down. Latency grows with log2(nodes), not with the
    ranks; each node sends and receives about n each way, at `bandwidth_fraction` of the links'
    bandwidth (NCCL's tree reaches less than its ring does: the cap)."""
    cost = Cost()
    if nodes * local <= 1 or n <= 0:
        return cost
    depth = math.ceil(math.log2(nodes)) if nodes > 1 else 0
    cost.add("inter latency", 2 * depth * inter.alpha)
    cost.add("intra latency", 2 * (local - 1) * intra.alpha)
    intra_bytes = 2 * n * intra.beta if local > 1 else 0.0
    inter_bytes = 2 * n * inter.beta if nodes > 1 else 0.0
    where = "inter" if inter_bytes >= intra_bytes else "intra"
    cost.add(where + " bandwidth", max(intra_bytes, inter_bytes) / bandwidth_fraction)
    return cost


def hierarchical(nodes, local, n, intra, inter, wire_factor, shared_link=True):
    """dtrain's hierarchical all-reduce: reduce-scatter inside the node, a ring between the nodes
    on each rank's 1/local of the data (in the wire format: wire_factor of the bytes), all-gather
    inside the node. The local ranks run their cross-node rings at once through the node's one
    link, so the link carries all of the node's data (shared_link); where each rank has a path of
    its own (simulated nodes on one host), each path carries the rank's 1/local."""
    cost = Cost()
    if local > 1:
        half = ring(local, n, intra, "intra")  # reduce-scatter plus all-gather is one ring all-reduce
        cost = cost.plus(half)
    if nodes > 1:
        cost.add("inter latency", 2 * (nodes - 1) * inter.alpha)
        share = n if shared_link else n / local
        cost.add("inter bandwidth", 2 * (nodes - 1) / nodes * share * wire_factor * inter.beta)
    return cost


WIRE_FACTOR = {"fp32": 1.0, "bf16": 0.5, "fp16": 0.5}
BACKENDS = ("nccl", "nccl-ring", "nccl-tree", "hierarchical", "mpi-ring", "auto")


def allreduce(backend, nodes, local, n, machine, wire="fp32"):
    """One bucket's all-reduce of n fp32 bytes on `backend` over nodes x local GPUs."""
    intra, inter = machine.intra, machine.inter
    if backend == "auto":  # dtrain's own choice (comm/backends/backend_choice.h)
        backend = "nccl" if nodes == 1 else "mpi-ring" if local == 1 else "hierarchical"
    if backend == "hierarchical":
        return hierarchical(nodes, local, n, intra, machine.inter_host, WIRE_FACTOR[wire], machine.shared_link)
    if backend == "mpi-ring":  # every hop of the flat ring carries the wire format
        return ring_across_nodes(nodes, local, n * WIRE_FACTOR[wire], intra, machine.inter_host)
    ring_cost = ring_across_nodes(nodes, local, n, intra, inter)
    if backend == "nccl-ring" or nodes == 1:
        return ring_cost
    tree_cost = nccl_tree(nodes, local, n, intra, inter, machine.tree_bandwidth_fraction)
    if backend == "nccl-tree":
        return tree_cost
    return ring_cost if ring_cost.total <= tree_cost.total else tree_cost  # NCCL's tuner picks the faster
