"""--fit: a tier's alpha and beta from a dtrain-bench-allreduce results JSON (bench/allreduce/).

Each measured size n gives one equation t(n) = a(n) alpha + b(n) beta + known(n), where a and b
come from the backend's model (collectives.py) for the run's ranks and nodes: on one node, the
ring inside it (the intra tier); across nodes of one rank each, the ring between them; across
nodes of several ranks, the hierarchical or ring model with the intra tier given (its part is the
known term). Least squares on the relative error, so that small messages (alpha) and large ones
(beta) both count."""
from collectives import Tier, WIRE_FACTOR
from inputs import InputError, field, load_json


def curve(path):
    """(backend, ranks, nodes, dtype, [(bytes, seconds)]) of the out-of-place rows."""
    d = load_json(path, "all-reduce results")
    if not isinstance(d, dict) or not isinstance(d.get("results"), list):
        raise InputError(f"{path}: not dtrain-bench-allreduce JSON (no 'results' list)")
    ranks, nodes = field(d, "world_size", path, int), field(d, "nodes", path, int)
    backend = field(d, "backend", path, str)
    points = {}
    for i, r in enumerate(d["results"]):
        where = f"{path}: results[{i}]"
        if r.get("inplace") or r.get("wrong", 0):
            continue
        n = field(r, "bytes", where, int)
        points.setdefault(n, []).append(field(r, "time_us", where) * 1e-6)
    rows = sorted((n, sorted(ts)[len(ts) // 2]) for n, ts in points.items())
    if not rows:
        raise InputError(f"{path}: no out-of-place row without wrong values")
    return backend, ranks, nodes, d.get("dtype", "fp32"), rows


def equations(backend, ranks, nodes, rows, intra, wire):
    """[(a, b, known, t)] for each row: t = a alpha + b beta + known."""
    local = ranks // nodes
    if ranks % nodes:
        raise InputError(f"{ranks} ranks on {nodes} nodes: not the same number on each")
    out = []
    for n, t in rows:
        if nodes == 1 or local == 1:
            p = ranks if nodes == 1 else nodes
            out.append((2 * (p - 1), 2 * (p - 1) / p * n, 0.0, t))
            continue
        if intra is None:
            raise InputError(f"a curve of {nodes} nodes x {local} ranks needs the intra tier (--machine with it)")
        if backend == "hierarchical":
            known = 2 * (local - 1) * intra.alpha + 2 * (local - 1) / local * n * intra.beta
            out.append((2 * (nodes - 1), 2 * (nodes - 1) / nodes * n * WIRE_FACTOR[wire], known, t))
        else:  # one ring through every rank, each step as slow as the hop that leaves the node
            out.append((2 * (ranks - 1), 2 * (ranks - 1) / ranks * n, 0.0, t))
    return out


def solve(eqs):
    """Weighted least squares of t - known = a alpha + b beta (weights 1/t), both >= 0. One
    size only: alpha 0, beta from it."""
    if len({b for _, b, _, _ in eqs}) < 2:
        a, b, known, t = eqs[-1]
        return Tier(0.0, max(t - known, 1e-12) / b), "one message size: alpha taken as 0"
    saa = sab = sbb = say = sby = 0.0
    for a, b, known, t in eqs:
        w = 1.0 / (t * t)
        y = t - known
        saa, sab, sbb = saa + w * a * a, sab + w * a * b, sbb + w * b * b
        say, sby = say + w * a * y, sby + w * b * y
    det = saa * sbb - sab * sab
    alpha, beta = (say * sbb - sby * sab) / det, (saa * sby - sab * say) / det
    note = ""
    if alpha < 0:  # the curve has no visible latency floor: the best fit through the origin
        alpha, note = 0.0, "alpha clipped to 0"
        beta = sby / sbb
    if beta <= 0:
        raise InputError("the fitted bandwidth is not positive: time does not grow with the size")
    return Tier(alpha, beta), note


def fit(path, intra=None, wire="fp32", min_bytes=0, max_bytes=None):
    backend, ranks, nodes, dtype, rows = curve(path)
    rows = [(n, t) for n, t in rows if n >= min_bytes and (max_bytes is None or n <= max_bytes)]
    if not rows:
        raise InputError(f"{path}: no size between --min-bytes and --max-bytes")
    if ranks < 2:
        raise InputError(f"{path}: field 'world_size' is {ranks}; a tier needs at least 2 ranks")
    eqs = equations(backend, ranks, nodes, rows, intra, wire)
    tier, note = solve(eqs)
    which = "intra" if nodes == 1 else "inter"
    table = [(n, t, a * tier.alpha + b * tier.beta + k) for (n, t), (a, b, k, _) in zip(rows, eqs)]
    return which, tier, note, table, (backend, ranks, nodes)
