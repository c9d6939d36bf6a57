"""Reads libdtrain's timelines (timeline_abi_test.cc) with Python's json module and checks them.

    check_library_timeline.py TRACE AT_SHUTDOWN RANKS

TRACE: every operation of the test has its track (a thread named after it) with the phases
NEGOTIATE_<KIND>, QUEUE, <KIND> and a DONE instant, one "rank R ready" instant per rank, begin and
end events balanced; the all-reduces say how many went in their fused collective; with several ranks the mismatch is marked; the
operation after dtrain_timeline_stop is absent. AT_SHUTDOWN (closed by dtrain_shutdown) is valid
JSON holding its barrier.
"""
import collections
import json
import sys


def tracks(path):
    with open(path) as f:
        doc = json.load(f)  # raises on anything but valid JSON
    events = doc["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    by_name = collections.defaultdict(list)
    for e in events:
        if e.get("ph") in ("B", "E", "i"):
            by_name[names[e["tid"]]].append(e)
    return by_name


def phases(events):
    return [e["name"] for e in events if e["ph"] == "B"]


def main():
    trace, at_shutdown, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3])
    problems = []
    by_name = tracks(trace)
    expected = {"grad/a": "ALLREDUCE", "grad/b": "ALLREDUCE", "grad/c": "ALLREDUCE", "weights": "BROADCAST",
                "ranks": "ALLGATHER", "step-end": "BARRIER"}
    for name, kind in expected.items():
        events = by_name.get(name)
        if not events:
            problems.append(f"{name}: no track")
            continue
        if phases(events) != ["NEGOTIATE_" + kind, "QUEUE", kind]:
            problems.append(f"{name}: phases {phases(events)}")
        depth = 0
        for e in events:
            depth += {"B": 1, "E": -1}.get(e["ph"], 0)
            if depth < 0:
                problems.append(f"{name}: an end without a begin")
        if depth != 0:
            problems.append(f"{name}: {depth} phases left open")
        ready = sorted(e["name"] for e in events if e["ph"] == "i" and e["name"].endswith(" ready"))
        if ready != sorted(f"rank {r} ready" for r in range(ranks)):
            problems.append(f"{name}: ready marks {ready}")
        done = [e["args"]["status"] for e in events if e["ph"] == "i" and e["name"] == "DONE"]
        if done != ["DTRAIN_OK"]:
            problems.append(f"{name}: DONE {done}")
    # How many went together depends on when each rank's background thread woke; each says.
    for name in ("grad/a", "grad/b", "grad/c"):
        args = [e["args"] for e in by_name.get(name, []) if e["ph"] == "B" and e["name"] == "ALLREDUCE"]
        if len(args) != 1 or not 1 <= args[0]["fused"] <= 3 or args[0]["bytes"] != 4 * args[0]["fused"]:
            problems.append(f"{name}: collective args {args}")
    if ranks > 1 and not any(e.get("name") == "MISMATCH" for e in by_name.get("mismatched", [])):
        problems.append("mismatched: no MISMATCH mark")
    if "after-stop" in by_name:
        problems.append("after-stop: recorded after dtrain_timeline_stop")
    if "before-shutdown" not in tracks(at_shutdown):
        problems.append("the timeline closed by dtrain_shutdown lacks before-shutdown")
    for p in problems:
        print("FAIL", p)
    if problems:
        sys.exit(1)
    print(f"timeline PASS: {len(by_name)} operation tracks on {ranks} rank(s), valid JSON after stop and shutdown")


if __name__ == "__main__":
    main()
