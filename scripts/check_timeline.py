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

  - with --hierarchical L (--backend hierarchical, L ranks per node): every bucket all-reduce of
    every step holds its phases on the comm track (docs/observability.md): "intra-node
    reduce-scatter", "cross-node ring", "intra-node all-gather" (L = 1: the cross-node ring
    alone), once each, inside the bucket's span, in that order, with their bytes (the bucket padded
    to L equal shards; the ring moves one shard, in fp32 or 16 bits); on a GPU, where the ring is
    staged through the host, each piece's "D2H", "host ring" and "H2D" inside the ring, in that
    order, the pieces' bytes adding up to the ring's (no pieces at all where the MPI takes device
    pointers).

  check_timeline.py FILE --ranks N --steps A:B --device cpu|gpu [--checkpoint-step S]
                    [--partial-rank R] [--hierarchical L]

--checkpoint-step: rank 0 has a "checkpoint write" span at that step. --partial-rank R: the file of
a run that failed inside the range: only rank R's spans, otherData "complete" false, and only the
range's first step must be whole. Exit 0 and "PASS" when every check holds; 1 and each failure.
"""
import argparse
import json
import sys
from collections import defaultdict

EPS = 0.002  # microseconds: ts and dur are printed with three decimals
# A staged piece's host ring is timed by the host clock, its copies by CUDA events turned into host
# time after the range, which can put them a few microseconds late: comparisons across the two.
CROSS_CLOCK_US = 100.0
PHASES = ["intra-node reduce-scatter", "cross-node ring", "intra-node all-gather"]
PIECE_PHASES = ["D2H", "host ring", "H2D"]


def check_bucket_phases(r, s, bucket, spans, local, gpu, fail):
    """spans: this bucket's spans of step s on rank r, name -> [(ts, end, args)]."""
    where = f"rank {r} step {s} bucket {bucket}"
    outer = spans["all-reduce"][0]
    wanted = PHASES if local > 1 else ["cross-node ring"]
    unexpected = set(spans) - set(wanted) - set(PIECE_PHASES) - {"all-reduce"}
    if unexpected:
        fail(f"{where}: phases {sorted(unexpected)} besides {wanted}")
    got = {}
    for name in wanted:
        if len(spans.get(name, [])) != 1:
            fail(f"{where}: {len(spans.get(name, []))} {name!r} span(s), expected 1")
            return
        got[name] = spans[name][0]
        if got[name][0] + EPS < outer[0] or got[name][1] > outer[1] + EPS:
            fail(f"{where}: {name} [{got[name][0]}, {got[name][1]}] outside the bucket [{outer[0]}, {outer[1]}]")
    for a, b in zip(wanted, wanted[1:]):
        if got[a][1] > got[b][0] + EPS:
            fail(f"{where}: {a} ends at {got[a][1]}, after {b} begins at {got[b][0]}")
    bucket_bytes = outer[2]["bytes"]
    ring = got["cross-node ring"][2].get("bytes", -1)
    if local > 1:
        rs, ag = got[PHASES[0]][2].get("bytes", -1), got[PHASES[2]][2].get("bytes", -1)
        shard = rs // (4 * local)
        covers = any(shard * local >= bucket_bytes // e > (shard - 1) * local for e in (4, 2))
        if rs != ag or rs != shard * local * 4 or not covers:
            fail(f"{where}: reduce-scatter {rs} B and all-gather {ag} B are not the {bucket_bytes} B bucket "
                 f"padded to {local} fp32 shards")
        shards = [shard]
    else:
        shards = [bucket_bytes // e for e in (4, 2)]  # the bucket's bytes are in fp32 or a 16-bit wire format
    if ring not in [n * e for n in shards for e in (4, 2)]:
        fail(f"{where}: cross-node ring {ring} B, expected a shard of {' or '.join(map(str, shards))} elements "
             f"in fp32 or 16 bits")
    pieces = {name: sorted(spans.get(name, []), key=lambda t: t[2].get("piece", -1)) for name in PIECE_PHASES}
    counts = {len(v) for v in pieces.values()}
    if not gpu:
        if counts != {0}:
            fail(f"{where}: staged pieces on the CPU path")
        return
    if counts == {0}:
        return  # an MPI that takes device pointers runs the ring on them: no staged pieces
    if len(counts) != 1 or 0 in counts:
        fail(f"{where}: staged pieces {[(n, len(v)) for n, v in pieces.items()]}, expected each piece's "
             f"{', '.join(PIECE_PHASES)}")
        return
    cross = got["cross-node ring"]
    for k, trio in enumerate(zip(*(pieces[n] for n in PIECE_PHASES))):
        for name, span in zip(PIECE_PHASES, trio):
            if span[2].get("piece") != k:
                fail(f"{where}: {name} pieces numbered {[t[2].get('piece') for t in pieces[name]]}")
                return
            if span[0] + CROSS_CLOCK_US < cross[0] or span[1] > cross[1] + CROSS_CLOCK_US:
                fail(f"{where}: {name} piece {k} outside the cross-node ring")
        for a, b in zip(trio, trio[1:]):
            if a[1] > b[0] + CROSS_CLOCK_US:
                fail(f"{where} piece {k}: its phases out of order ({PIECE_PHASES})")
    if sum(t[2].get("bytes", 0) for t in pieces["host ring"]) != ring:
        fail(f"{where}: the pieces' host rings moved {sum(t[2].get('bytes', 0) for t in pieces['host ring'])} B, "
             f"the cross-node ring {ring} B")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--steps", required=True)
    ap.add_argument("--device", choices=["cpu", "gpu"], required=True)
    ap.add_argument("--checkpoint-step", type=int)
    ap.add_argument("--partial-rank", type=int)
    ap.add_argument("--hierarchical", type=int, metavar="L", help="ranks per node of a --backend hierarchical run")
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
        by_bucket = defaultdict(lambda: defaultdict(list))  # (step, bucket) -> phase -> [(ts, end, args)]
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
                if "bucket" in e["args"]:
                    phase = e["name"].split(" bucket ")[0]
                    by_bucket[(e["args"].get("step"), e["args"]["bucket"])][phase].append(
                        (e["ts"], e["ts"] + e["dur"], e["args"]))
                    if phase != "all-reduce":
                        if tid not in comm:
                            fail(f"rank {r}: {e['name']} on track {thread_names.get((pid, tid))}")
                        continue
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
            if a.hierarchical is not None:
                for (step_of, bucket), spans in sorted(by_bucket.items()):
                    if step_of == s:
                        check_bucket_phases(r, s, bucket, spans, a.hierarchical, gpu, fail)
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
