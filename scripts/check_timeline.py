#!/usr/bin/env python3
"""Checks a dtrain-train --timeline file (Chrome trace JSON) the way a viewer
needs it and the way a reader trusts it:

  - python's json module loads it; it has traceEvents, displayTimeUnit and otherData;
  - every event is metadata ("M") or complete ("X") with numeric ts and dur >= 0; every pid has a
    process_name "rank R (host)" and every track (pid, tid) with events a thread_name;
  - per track, ts never decreases and every span nests inside the open one or starts after it ends
    (chrome://tracing and Perfetto stack slices that way);
  - every rank and every step of the range has its phases: on the CPU path data wait, forward,
    backward, gradient wait and SGD update on the step loop's thread and the buckets' all-reduces
    on the comm worker; on a GPU the H2D copy on the copy stream, forward, backward and SGD update
    on the compute stream and the buckets' all-reduces on the comm stream;
  - within a step, forward ends before backward begins, every bucket's all-reduce begins after
    backward begins and ends before the SGD update begins (on the GPU: inside the step as the GPU
    ran it, H2D copy to SGD update), and the step loop's "step" span holds its data wait.

  check_timeline.py FILE --ranks N --steps A:B --device cpu|gpu [--checkpoint-step S]
                    [--partial-rank R]

--checkpoint-step: rank 0 has a "checkpoint write" span at that step. --partial-rank R: the file of
a run that failed inside the range: only rank R's spans, otherData "complete" false, and only the
range's first step must be whole. Exit 0 and "PASS" when every check holds; 1 and each failure.
"""
import argparse
import json
import sys
from collections import defaultdict

EPS = 0.002  # microseconds: ts and dur are printed with three decimals


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--steps", required=True)
    ap.add_argument("--device", choices=["cpu", "gpu"], required=True)
    ap.add_argument("--checkpoint-step", type=int)
    ap.add_argument("--partial-rank", type=int)
    a = ap.parse_args()
    first, last = (int(x) for x in a.steps.split(":"))
    failures = []

    def fail(msg):
        failures.append(msg)

    with open(a.file, encoding="utf-8") as f:
        doc = json.load(f)
    for key in ("traceEvents", "displayTimeUnit", "otherData"):
        if key not in doc:
            fail(f"no {key} at the top level")
    events = doc.get("traceEvents", [])
    other = doc.get("otherData", {})
    partial = a.partial_rank is not None
    if other.get("complete") != (not partial):
        fail(f"otherData complete is {other.get('complete')}: {other.get('ending')}")
    if (other.get("first_step"), other.get("last_step")) != (first, last):
        fail(f"otherData steps {other.get('first_step')}:{other.get('last_step')}, expected {first}:{last}")

    process_names, thread_names = {}, {}
    tracks = defaultdict(list)  # (pid, tid) -> X events in file order
    for e in events:
        ph = e.get("ph")
        if ph == "M":
            if e.get("name") == "process_name":
                process_names[e["pid"]] = e["args"]["name"]
            elif e.get("name") == "thread_name":
                thread_names[(e["pid"], e["tid"])] = e["args"]["name"]
            continue
        if ph != "X":
            fail(f"event of phase {ph!r}: {e}")
            continue
        if not all(isinstance(e.get(k), (int, float)) for k in ("ts", "dur", "pid", "tid")):
            fail(f"event without numeric ts/dur/pid/tid: {e}")
            continue
        if e["dur"] < 0:
            fail(f"negative duration: {e}")
        tracks[(e["pid"], e["tid"])].append(e)

    ranks = [a.partial_rank] if partial else list(range(a.ranks))
    if sorted({pid for pid, _ in tracks}) != sorted(ranks):
        fail(f"ranks with spans {sorted({pid for pid, _ in tracks})}, expected {ranks}")
    for r in ranks:
        name = process_names.get(r, "")
        if not (name.startswith(f"rank {r} (") and name.endswith(")")):
            fail(f"pid {r}: process_name {name!r}, expected 'rank {r} (host)'")

    for (pid, tid), spans in sorted(tracks.items()):
        if (pid, tid) not in thread_names:
            fail(f"rank {pid} track {tid} has no thread_name")
        open_ends = []
        previous = None
        for e in spans:
            if previous is not None and e["ts"] < previous:
                fail(f"rank {pid} track {tid}: ts goes back at {e['name']} step {e['args'].get('step')}")
            previous = e["ts"]
            end = e["ts"] + e["dur"]
            while open_ends and open_ends[-1] <= e["ts"] + EPS:
                open_ends.pop()
            if open_ends and end > open_ends[-1] + EPS:
                fail(f"rank {pid} track {tid}: {e['name']} step {e['args'].get('step')} overlaps the span "
                     f"before it only in part")
            open_ends.append(end)

    def track_of(pid, name_part):
        return [t for (p, t), n in thread_names.items() if p == pid and name_part in n]

    gpu = a.device == "gpu"
    loop_phases = ["step", "data wait"] + ([] if gpu else ["forward", "backward", "gradient wait", "SGD update"])
    stream_phases = {"copy stream": ["H2D copy"], "compute stream": ["forward", "backward", "SGD update"]}
    comm_track = "comm stream" if gpu else "comm worker"
    steps_whole = [first] if partial else list(range(first, last + 1))
    for r in ranks:
        by_step = defaultdict(lambda: defaultdict(list))  # step -> name -> [(ts, end)]
        loop = track_of(r, "step loop")
        comm = track_of(r, comm_track)
        if not loop:
            fail(f"rank {r}: no step loop track")
        if not comm and a.ranks > 1:
            fail(f"rank {r}: no {comm_track} track")
        names_by_track = {}
        for (pid, tid), spans in tracks.items():
            if pid != r:
                continue
            for e in spans:
                name = e["name"]
                if name.startswith("all-reduce bucket "):
                    if tid not in comm:
                        fail(f"rank {r}: {name} on track {thread_names.get((pid, tid))}")
                    if not isinstance(e["args"].get("bytes"), int) or e["args"]["bytes"] <= 0:
                        fail(f"rank {r}: {name} without its bytes")
                    name = "all-reduce"
                by_step[e["args"].get("step")][name].append((e["ts"], e["ts"] + e["dur"]))
                names_by_track.setdefault(name, set()).add(thread_names.get((pid, tid), ""))
        expected_steps = set(range(first, last + 1))
        if not set(by_step) <= expected_steps:
            fail(f"rank {r}: spans of steps {sorted(set(by_step) - expected_steps)} outside {first}:{last}")
        for name in loop_phases:
            if name in names_by_track and not all("step loop" in t for t in names_by_track[name]):
                fail(f"rank {r}: {name} not on the step loop's track")
        if gpu:
            for track, names in stream_phases.items():
                for name in names:
                    if name in names_by_track and not all(track in t for t in names_by_track[name]):
                        fail(f"rank {r}: {name} not on the {track}")
        for s in steps_whole:
            got = by_step.get(s, {})
            wanted = loop_phases + (stream_phases["copy stream"] + stream_phases["compute stream"] if gpu else [])
            if a.ranks > 1:
                wanted = wanted + ["all-reduce"]
            missing = False
            for name in wanted:
                n = len(got.get(name, []))
                if n != 1 and not (name == "all-reduce" and n > 1):
                    fail(f"rank {r} step {s}: {n} {name!r} span(s)")
                    missing = True
            if missing:
                continue
            fwd, bwd, sgd = got["forward"][0], got["backward"][0], got["SGD update"][0]
            step, wait = got["step"][0], got["data wait"][0]
            if fwd[1] > bwd[0] + EPS:
                fail(f"rank {r} step {s}: forward ends at {fwd[1]}, after backward begins at {bwd[0]}")
            if bwd[1] > sgd[0] + EPS:
                fail(f"rank {r} step {s}: backward ends after the SGD update begins")
            if not (step[0] - EPS <= wait[0] and wait[1] <= step[1] + EPS):
                fail(f"rank {r} step {s}: data wait outside the step")
            if not gpu and not (step[0] - EPS <= fwd[0] and sgd[1] <= step[1] + EPS):
                fail(f"rank {r} step {s}: forward..SGD update outside the step loop's step")
            gpu_step = (got["H2D copy"][0][0], sgd[1]) if gpu else (fwd[0], sgd[1])
            for b0, b1 in got.get("all-reduce", []):
                if b0 + EPS < bwd[0] or b1 > sgd[0] + EPS:
                    fail(f"rank {r} step {s}: a bucket all-reduce [{b0}, {b1}] outside backward's start "
                         f"{bwd[0]} .. the SGD update's start {sgd[0]}")
                if b0 + EPS < gpu_step[0] or b1 > gpu_step[1] + EPS:
                    fail(f"rank {r} step {s}: a bucket all-reduce outside the step")
            buckets = len(got.get("all-reduce", []))
            print(f"rank {r} step {s}: forward {fwd[1] - fwd[0]:.1f} us, backward {bwd[1] - bwd[0]:.1f} us, "
                  f"{buckets} bucket all-reduce(s), SGD update {sgd[1] - sgd[0]:.1f} us")
        if a.checkpoint_step is not None and r == 0:
            if len(by_step.get(a.checkpoint_step, {}).get("checkpoint write", [])) != 1:
                fail(f"rank 0: no checkpoint write at step {a.checkpoint_step}")
    print(f"{len(events)} events, {sum(len(v) for v in tracks.values())} spans on {len(tracks)} tracks; "
          f"otherData: {json.dumps(other)}")
    for msg in failures:
        print("FAIL:", msg)
    if failures:
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
