#!/usr/bin/env python3
"""Where a step's gradient averaging loses time, from a dtrain-train --timeline file (Chrome trace
JSON): per rank and step, when backward ended, when the step's last bucket all-reduce ended and
when its SGD update ended (milliseconds after the step's forward began), the tail between the
first two (the time after backward that the step waits for its gradients; negative: the buckets
were done first), and each bucket phase's total time in the step (summed over the buckets, and the
part of it after backward ended), then the means over every rank and step.

The phases are the spans inside the buckets that the backends report (docs/observability.md):
with --backend hierarchical "intra-node reduce-scatter", "cross-node ring" and "intra-node
all-gather" (uneven nodes: "intra-node all-reduce" and "intra-node broadcast"), and for device
buffers staged through the host each piece's "D2H", "host ring" and "H2D" (pipelined: pieces
overlap, so their totals are busy times, not a share of the bucket). Standard library only.

    timeline_phases.py TRACE.json [--rank R] [--json]

--json prints one JSON object (the same numbers) instead of the table. Exit 1 with a message
when the file is not a timeline or has no step with both a backward and a bucket all-reduce.
"""
import argparse
import json
import re
import sys
from collections import defaultdict

BUCKET_SPAN = re.compile(r"^(?P<phase>.+?) bucket (?P<bucket>\d+)(?: piece (?P<piece>\d+))?$")


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"timeline_phases.py: cannot read {path}: {e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        sys.exit(f"timeline_phases.py: {path} is not a dtrain-train timeline (no traceEvents list)")
    return doc["traceEvents"]


def collect(events, only_rank):
    """(rank, step) -> {"forward": [...], "backward": [...], "buckets": [...], "phases": {name: [...]}},
    each a list of (begin_us, end_us)."""
    steps = defaultdict(
        lambda: {"forward": [], "backward": [], "SGD update": [], "buckets": [], "phases": defaultdict(list)})
    for e in events:
        if e.get("ph") != "X" or "step" not in e.get("args", {}):
            continue
        rank = e["pid"]
        if only_rank is not None and rank != only_rank:
            continue
        span = (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        entry = steps[(rank, e["args"]["step"])]
        name = e["name"]
        if name in ("forward", "backward", "SGD update"):
            entry[name].append(span)
            continue
        m = BUCKET_SPAN.match(name)
        if not m:
            continue
        if m.group("phase") == "all-reduce":
            entry["buckets"].append(span)
        else:
            entry["phases"][m.group("phase")].append(span)
    return steps


def summarize(steps):
    rows = []
    for (rank, step), s in sorted(steps.items()):
        if not s["forward"] or not s["backward"] or not s["buckets"]:
            continue
        origin = min(b for b, _ in s["forward"])
        backward_end = max(e for _, e in s["backward"])  # the last micro-batch's, with accumulation
        last_bucket_end = max(e for _, e in s["buckets"])
        update_end = max((e for _, e in s["SGD update"]), default=None)  # None: a partial file
        phases = {}
        for phase, spans in sorted(s["phases"].items()):
            total = sum(e - b for b, e in spans)
            after = sum(max(0.0, e - max(b, backward_end)) for b, e in spans)
            phases[phase] = {"spans": len(spans), "total_ms": total / 1e3, "after_backward_ms": after / 1e3}
        rows.append({
            "rank": rank,
            "step": step,
            "buckets": len(s["buckets"]),
            "backward_end_ms": (backward_end - origin) / 1e3,
            "last_bucket_end_ms": (last_bucket_end - origin) / 1e3,
            "tail_ms": (last_bucket_end - backward_end) / 1e3,
            "update_end_ms": None if update_end is None else (update_end - origin) / 1e3,
            "all_reduce_total_ms": sum(e - b for b, e in s["buckets"]) / 1e3,
            "phases": phases,
        })
    return rows


def means(rows):
    n = len(rows)
    out = {k: sum(r[k] for r in rows) / n
           for k in ("backward_end_ms", "last_bucket_end_ms", "tail_ms", "all_reduce_total_ms")}
    updates = [r["update_end_ms"] for r in rows if r["update_end_ms"] is not None]
    out["update_end_ms"] = sum(updates) / len(updates) if updates else None
    phases = defaultdict(lambda: {"total_ms": 0.0, "after_backward_ms": 0.0})
    for r in rows:
        for phase, p in r["phases"].items():
            phases[phase]["total_ms"] += p["total_ms"] / n
            phases[phase]["after_backward_ms"] += p["after_backward_ms"] / n
    out["phases"] = dict(sorted(phases.items()))
    return out


def ms(value, width):
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.2f}"


def print_table(rows, mean):
    names = sorted({p for r in rows for p in r["phases"]})
    print("times in ms after the step's forward began; tail = last bucket end - backward end;")
    print("per phase: total over the step's buckets (after backward ended)")
    print(f"{'rank':>4} {'step':>5} {'bkts':>4} {'bwd end':>9} {'last bkt':>9} {'tail':>8} {'upd end':>9} "
          f"{'all-red':>8}  phases")
    for r in rows:
        phases = "  ".join(f"{p} {r['phases'][p]['total_ms']:.2f} ({r['phases'][p]['after_backward_ms']:.2f})"
                           for p in names if p in r["phases"])
        print(f"{r['rank']:>4} {r['step']:>5} {r['buckets']:>4} {r['backward_end_ms']:>9.2f} "
              f"{r['last_bucket_end_ms']:>9.2f} {r['tail_ms']:>8.2f} {ms(r['update_end_ms'], 9)} "
              f"{r['all_reduce_total_ms']:>8.2f}  {phases}")
    print(f"mean of {len(rows)} rank-steps: backward end {mean['backward_end_ms']:.2f}, last bucket end "
          f"{mean['last_bucket_end_ms']:.2f}, tail {mean['tail_ms']:.2f}, update end {ms(mean['update_end_ms'], 0)}, "
          f"bucket all-reduces "
          f"{mean['all_reduce_total_ms']:.2f}")
    for phase, p in mean["phases"].items():
        print(f"  {phase:<28} {p['total_ms']:9.2f} total  {p['after_backward_ms']:9.2f} after backward")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--rank", type=int, help="this rank only")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    a = ap.parse_args()
    rows = summarize(collect(load(a.trace), a.rank))
    if not rows:
        sys.exit(f"timeline_phases.py: {a.trace}: no step has a forward, a backward and a bucket all-reduce"
                 + (f" on rank {a.rank}" if a.rank is not None else "") + " (a single-rank run has no buckets)")
    mean = means(rows)
    if a.json:
        print(json.dumps({"steps": rows, "mean": mean}, indent=1))
    else:
        print_table(rows, mean)
    return 0


if __name__ == "__main__":
    sys.exit(main())
