#!/usr/bin/env python3
"""Side-by-side markdown table of two dtrain-bench-allreduce JSON files (ours vs a peer).

usage: bench/summarize_allreduce.py OURS.json PEER.json [--sizes 8,4096,67108864]
Prints, per size and placement: time and busbw of both, and ours/peer (busbw ratio; for
latency-sized rows, peer_time/our_time, >1 meaning we are faster).
"""
import json
import sys


def load(path):
    with open(path) as f:
        data = json.load(f)
    rows = {(r["bytes"], r["inplace"]): r for r in data["results"]}
    return data, rows


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    ours, our_rows = load(argv[1])
    peer, peer_rows = load(argv[2])
    sizes = None
    if len(argv) > 4 and argv[3] == "--sizes":
        sizes = {int(s) for s in argv[4].split(",")}
    print(f"{ours['backend']} vs {peer['backend']}, {ours['world_size']} ranks, {ours['dtype']} {ours['op']}, "
          f"host {ours['host']}, {ours['date']}")
    print()
    print("| bytes | placement | ours us | peer us | ours busbw GB/s | peer busbw GB/s | speed-up (peer time / ours) |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for key in sorted(our_rows):
        if key not in peer_rows or (sizes and key[0] not in sizes):
            continue
        o, p = our_rows[key], peer_rows[key]
        ratio = p["time_us"] / o["time_us"] if o["time_us"] > 0 else float("nan")
        print(f"| {key[0]} | {'in-place' if key[1] else 'out-of-place'} | {o['time_us']:.2f} | {p['time_us']:.2f} | "
              f"{o['busbw_gbps']:.2f} | {p['busbw_gbps']:.2f} | {ratio:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
