#!/usr/bin/python3
"""The tables of bench/run_library.sh's folder: the C ABI against dtrain's own communicator and
MPI_Allreduce, medians over the rounds, and the targets (ABI + name matching <= 10% over the
communicator at 64 MiB; <= 30 us per 4-byte call).
  summarize_library.py OUT_DIR   (reads library_np*_r*.json, communicator_np*_r*.json, mpi_np*_r*.json)
"""
import glob
import json
import os
import re
import statistics
import sys

LATENCY_TARGET_US = 30.0
OVERHEAD_TARGET = 0.10
TARGET_BYTES = 64 << 20


def load(folder, kind):
    """{ranks: [json of each round, in round order]}"""
    runs = {}
    for path in glob.glob(os.path.join(folder, f"{kind}_np*_r*.json")):
        m = re.search(r"_np(\d+)_r(\d+)\.json$", path)
        with open(path) as f:
            runs.setdefault(int(m.group(1)), []).append((int(m.group(2)), json.load(f)))
    return {np: [j for _, j in sorted(rounds, key=lambda x: x[0])] for np, rounds in runs.items()}


def times(runs, target=None):
    """{(bytes, inplace): [time_us of each round]} from one kind's rounds."""
    out = {}
    for run in runs:
        rows = run["bandwidth"]["results"] if "bandwidth" in run else run["results"]
        for r in rows:
            if target is None or r.get("target") == target:
                out.setdefault((r["bytes"], r["inplace"]), []).append(r["time_us"])
    return out


def mib(n):
    return f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n / 1024:g} KiB"


def latency_table(lib):
    lines = ["## Latency: 1,000 named 4-byte fp32 all-reduces, each submitted and waited", "",
             "| ranks | us per call, median | p90 | rounds (median) | single calls on rank 0, median / p90 / max | "
             "target <= 30 us |", "| ---: | ---: | ---: | --- | --- | --- |"]
    for np in sorted(lib):
        rounds = [r["latency"] for r in lib[np] if "latency" in r]
        if not rounds:
            continue
        med = statistics.median(r["per_call_us"]["median"] for r in rounds)
        p90 = statistics.median(r["per_call_us"]["p90"] for r in rounds)
        single = rounds[-1]["single_call_us_rank0"]
        each = ", ".join(f"{r['per_call_us']['median']:.1f}" for r in rounds)
        verdict = "met" if med <= LATENCY_TARGET_US else "**missed**"
        lines.append(f"| {np} | **{med:.1f}** | {p90:.1f} | {each} | {single['median']:.1f} / {single['p90']:.1f} / "
                     f"{single['max']:.0f} | {verdict} |")
    return lines


def bandwidth_table(lib, comm, mpi):
    lines = ["## Bandwidth: fp32 sum, time per call (us), median over rounds; overhead = ABI / communicator - 1", "",
             "| ranks | size | in place | ABI | communicator | overhead (rounds) | MPI_Allreduce | "
             "MPI_Allreduce beside dtrain | target <= 10% at 64 MiB |",
             "| ---: | ---: | --- | ---: | ---: | --- | ---: | ---: | --- |"]
    for np in sorted(lib):
        abi = times(lib[np], "dtrain-abi")
        beside = times(lib[np], "mpi-allreduce")
        own = times(comm.get(np, []))
        raw = times(mpi.get(np, []))
        for key in sorted(abi):
            if key not in own:
                continue
            a, c = statistics.median(abi[key]), statistics.median(own[key])
            paired = [x / y - 1 for x, y in zip(abi[key], own[key])]
            overhead = a / c - 1
            verdict = ""
            if key[0] == TARGET_BYTES:
                verdict = "met" if overhead <= OVERHEAD_TARGET else "**missed**"
            m = f"{statistics.median(raw[key]):.0f}" if key in raw else "-"
            b = f"{statistics.median(beside[key]):.0f}" if key in beside else "-"
            lines.append(f"| {np} | {mib(key[0])} | {'yes' if key[1] else 'no'} | {a:.0f} | {c:.0f} | "
                         f"**{overhead * 100:+.1f}%** ({', '.join(f'{p * 100:+.0f}%' for p in paired)}) | {m} | {b} | "
                         f"{verdict} |")
    return lines


def fusion_table(lib):
    lines = ["## Fusion: 1,000 named 4-byte all-reduces submitted at once, then all waited", "",
             "| ranks | time (us), median | p90 | collectives per 1,000 operations, median (min-max) | rounds |",
             "| ---: | ---: | ---: | --- | --- |"]
    for np in sorted(lib):
        rounds = [r["fusion"] for r in lib[np] if "fusion" in r]
        if not rounds:
            continue
        t = statistics.median(r["time_us"]["median"] for r in rounds)
        p90 = statistics.median(r["time_us"]["p90"] for r in rounds)
        c = statistics.median(r["collectives"]["median"] for r in rounds)
        lo = min(r["collectives"]["min"] for r in rounds)
        hi = max(r["collectives"]["max"] for r in rounds)
        each = "; ".join(f"{r['time_us']['median']:.0f} us in {r['collectives']['median']:g}" for r in rounds)
        lines.append(f"| {np} | **{t:.0f}** | {p90:.0f} | **{c:g}** ({lo:g}-{hi:g}) | {each} |")
    return lines


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: summarize_library.py OUT_DIR (the folder bench/run_library.sh wrote)")
    folder = sys.argv[1]
    lib = load(folder, "library")
    if not lib:
        sys.exit(f"summarize_library.py: {folder} holds no library_np*_r*.json")
    comm, mpi = load(folder, "communicator"), load(folder, "mpi")
    rounds = max(len(v) for v in lib.values())
    print(f"# dtrain-bench-library: {rounds} round(s), ranks {', '.join(str(n) for n in sorted(lib))}\n")
    for table in (latency_table(lib), bandwidth_table(lib, comm, mpi), fusion_table(lib)):
        print("\n".join(table) + "\n")
    print("MPI_Allreduce: dtrain-bench-allreduce --backend raw-mpi (a process of its own); beside dtrain: "
          "dtrain-bench-library's own MPI_Allreduce on the same buffers, with dtrain's background thread idle.")


if __name__ == "__main__":
    main()
