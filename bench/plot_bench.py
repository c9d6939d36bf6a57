#!/usr/bin/env python3
"""Plots benchmark JSON as PNG: dtrain-bench-train results (a list of rows with world_size and
img_per_sec_total) as images/s against GPUs with the ideal (linear) line, and dtrain-bench-allreduce
results (an object with "results": bytes, busbw_gbps) as bus bandwidth against message size. Each
JSON file is one series, labelled by its backend / precision. Needs matplotlib (Debian:
python3-matplotlib).
    plot_bench.py OUT.png FILE.json...
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def kind_of(data, path):
    if isinstance(data, list) and data and "img_per_sec_total" in data[0]:
        return "train"
    if isinstance(data, dict) and "results" in data and data["results"] and "busbw_gbps" in data["results"][0]:
        return "allreduce"
    sys.exit(f"plot_bench: {path} is neither dtrain-bench-train nor dtrain-bench-allreduce JSON")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, paths = sys.argv[1], sys.argv[2:]
    loaded = []
    for path in paths:
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            sys.exit(f"plot_bench: {path}: {e}")
        loaded.append((path, data, kind_of(data, path)))
    kinds = {k for _, _, k in loaded}
    if len(kinds) != 1:
        sys.exit("plot_bench: give files of one kind per plot (train or allreduce), not both")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if kinds == {"train"}:
        top = 1
        for path, rows, _ in loaded:
            rows = sorted(rows, key=lambda r: r["world_size"])
            gpus = [r["world_size"] for r in rows]
            label = f"{rows[0].get('model', '?')} {rows[0].get('precision', '')} b{rows[0].get('batch_per_gpu', '?')}"
            ax.plot(gpus, [r["img_per_sec_total"] for r in rows], "o-", label=f"{label} ({os.path.basename(path)})")
            one = rows[0]["img_per_sec_total"] / rows[0]["world_size"]
            ax.plot(gpus, [one * g for g in gpus], ":", color="gray")
            top = max(top, max(gpus))
        ax.plot([], [], ":", color="gray", label="ideal (linear from the smallest run)")
        ax.set(xlabel="GPUs", ylabel="images/s in total", title="training throughput")
        ax.set_xticks(range(1, top + 1))
    else:
        for path, data, _ in loaded:
            results = [r for r in data["results"] if not r.get("inplace")]
            sizes = [r["bytes"] for r in results]
            label = f"{data.get('backend', '?')}, {data.get('world_size', '?')} ranks"
            ax.plot(sizes, [r["busbw_gbps"] for r in results], "o-", label=f"{label} ({os.path.basename(path)})")
        ax.set_xscale("log", base=2)
        ax.set(xlabel="message size (bytes)", ylabel="bus bandwidth (GB/s)", title="all-reduce, out-of-place")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    # Through a temporary file, so a failed or killed plot never leaves half a PNG.
    partial = out + ".partial.png"
    fig.savefig(partial, dpi=100)
    os.replace(partial, out)
    print(f"plot_bench: wrote {out} from {len(loaded)} file(s)")


if __name__ == "__main__":
    main()
