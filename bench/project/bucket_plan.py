"""Where the engine cuts the flat gradient buffer into buckets: comm/gradient_sync/bucket_plan.cc's
rule, line for line, so that the projection's buckets are the run's. A small tail bucket at the
end of the buffer (backward's last), an optional small first bucket at its start, the body in
between; each cut moved to the nearest parameter boundary (where a range begins) within an eighth
of its bucket, never past the tail's start. All in elements."""
import bisect


def _cut(cuts, boundaries, at, elements, limit):
    best, distance = at, elements // 8 + 1
    hi = bisect.bisect_left(boundaries, at)
    if hi < len(boundaries) and boundaries[hi] < limit and boundaries[hi] - at < distance:
        best, distance = boundaries[hi], boundaries[hi] - at
    if hi > 0 and boundaries[hi - 1] > cuts[-1] and at - boundaries[hi - 1] < distance:
        best = boundaries[hi - 1]
    cuts.append(best)


def plan_cuts(count, body, tail=0, first=0, ranges=()):
    """The cuts (0 .. count, ascending) of [0, count) elements into buckets of `body` elements, a
    tail of `tail` and a first bucket of `first` (0: none); ranges: [(begin, end)] of the
    parameters, disjoint. No buckets (an empty list) for no elements."""
    if body < 1:
        raise ValueError(f"gradient bucket of {body} elements: the body must be at least one")
    if count == 0:
        return []
    boundaries = sorted(b for b, e in ranges if 0 < b < e)
    tail_begin = count if tail == 0 else count - min(tail, count)
    cuts = [0]
    if 0 < first < tail_begin:
        _cut(cuts, boundaries, first, first, tail_begin)
    while cuts[-1] + body < tail_begin:
        _cut(cuts, boundaries, cuts[-1] + body, body, tail_begin)
    if cuts[-1] < tail_begin < count:
        _cut(cuts, boundaries, tail_begin, tail, count)
    cuts.append(count)
    return cuts
