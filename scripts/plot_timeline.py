#!/usr/bin/env python3
"""A dtrain-train --timeline file (Chrome trace JSON) drawn as a Gantt chart in one PNG: a row per
rank and track (the step loop's thread, the GPU's streams, the gradient all-reduces), a bar per
span coloured by phase, each step's extent shaded behind its row. Our own rendering, for pages
that cannot embed Perfetto; the file itself opens in ui.perfetto.dev and chrome://tracing. Needs
matplotlib (Debian: python3-matplotlib).
    plot_timeline.py TRACE.json OUT.png [--title TEXT]
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

COLOURS = {
    "data wait": "tab:gray",
    "H2D copy": "tab:cyan",
    "forward": "tab:blue",
    "backward": "tab:orange",
    "gradient wait": "tab:pink",
    "all-reduce": "tab:red",
    # a bucket's phases (docs/observability.md), drawn thinner over the bucket's bar
    "intra-node reduce-scatter": "gold",
    "intra-node all-reduce": "gold",
    "cross-node ring": "darkred",
    "intra-node all-gather": "khaki",
    "intra-node broadcast": "khaki",
    "D2H": "lightblue",
    "host ring": "salmon",
    "H2D": "lightgreen",
    "SGD update": "tab:green",
    "loss read-back": "tab:olive",
    "checkpoint write": "tab:purple",
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("out")
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    try:
        with open(args.trace, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"plot_timeline: {args.trace}: {e}")
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        sys.exit(f"plot_timeline: {args.trace} has no traceEvents list (not a Chrome trace file)")
    process, thread = {}, {}
    spans = []
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            process[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            thread[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e.get("ph") == "X":
            spans.append(e)
    if not spans:
        sys.exit(f"plot_timeline: {args.trace} has no spans")

    rows = sorted({(e["pid"], e["tid"]) for e in spans})
    row_of = {key: i for i, key in enumerate(rows)}
    fig, ax = plt.subplots(figsize=(13, 0.55 * len(rows) + 1.6))
    seen = set()
    for e in spans:
        y = row_of[(e["pid"], e["tid"])]
        start, width = e["ts"] / 1000.0, e["dur"] / 1000.0  # ms
        name = e["name"].split(" bucket ")[0]  # "all-reduce bucket 3", "D2H bucket 3 piece 1"
        inside = name != "all-reduce" and "bucket" in e["args"]  # a bucket's phase
        if name == "step":  # the step's extent, shaded behind the row, with its number
            ax.broken_barh([(start, width)], (y - 0.45, 0.9), facecolors="0.93", edgecolors="0.6", linewidth=0.5,
                           zorder=0)
            ax.text(start + width / 2, y + 0.32, f"step {e['args'].get('step')}", ha="center", va="center",
                    fontsize=7, color="0.35", zorder=3)
            continue
        colour = COLOURS.get(name, "tab:brown")
        height = 0.36 if inside else 0.6
        ax.broken_barh([(start, width)], (y - height / 2, height), facecolors=colour, edgecolors="black",
                       linewidth=0.3, zorder=2.5 if inside else 2)
        seen.add(name)
    labels = [f"{process.get(pid, f'pid {pid}')}: {thread.get((pid, tid), f'tid {tid}')}" for pid, tid in rows]
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.grid(axis="x", alpha=0.3)
    legend = [Patch(facecolor=COLOURS[n], edgecolor="black", label=n) for n in COLOURS if n in seen]
    ax.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.9 / (len(rows) + 3)),
              ncol=min(len(legend), 5), fontsize=8, frameon=False)
    other = doc.get("otherData", {})
    title = args.title or (f"dtrain-train timeline, steps {other.get('first_step', '?')}-{other.get('last_step', '?')}"
                           f", {other.get('ranks', '?')} rank(s)")
    ax.set_title(title + " (our rendering of the trace file)", fontsize=10)
    fig.tight_layout()
    # Through a temporary file, so a failed or killed plot never leaves half a PNG.
    partial = args.out + ".partial.png"
    fig.savefig(partial, dpi=110)
    plt.close(fig)
    os.replace(partial, args.out)
    print(f"plot_timeline: wrote {args.out} ({len(spans)} spans on {len(rows)} tracks)")


if __name__ == "__main__":
    main()
