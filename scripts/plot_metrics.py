#!/usr/bin/env python3
"""Training curves from a dtrain-train metrics file (--metrics-file, JSON lines): the train loss at
every progress line and the validation top-1 / top-5 at every epoch's end, against the global
step, in one PNG. A file holding several runs (a requeued job appends) plots its last run unless
--all-runs. Needs matplotlib (Debian: python3-matplotlib).
    plot_metrics.py METRICS.jsonl OUT.png [--all-runs]
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def read_records(path):
    records = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"plot_metrics: {path} line {number} is not JSON: {e}")
    return records


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("metrics")
    parser.add_argument("out")
    parser.add_argument("--all-runs", action="store_true", help="plot every run in the file, not only the last")
    args = parser.parse_args()
    records = read_records(args.metrics)
    starts = [i for i, r in enumerate(records) if r.get("event") == "run"]
    if starts and not args.all_runs:
        records = records[starts[-1]:]
    train = [r for r in records if r.get("event") == "train"]
    validation = [r for r in records if r.get("event") == "validation"]
    if not train and not validation:
        sys.exit(f"plot_metrics: {args.metrics} has no train or validation records (was --log-every-steps 0?)")

    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(11, 4))
    if train:
        loss_ax.plot([r["step"] for r in train], [r["loss"] for r in train], label="train loss", color="tab:blue")
    if validation:
        loss_ax.plot([r["step"] for r in validation], [r["loss"] for r in validation], "o-", label="validation loss",
                     color="tab:orange")
        steps = [r["step"] for r in validation]
        acc_ax.plot(steps, [100 * r["top1"] for r in validation], "o-", label="top-1")
        acc_ax.plot(steps, [100 * r["top5"] for r in validation], "s--", label="top-5")
    loss_ax.set(xlabel="global step", ylabel="loss", title="loss")
    acc_ax.set(xlabel="global step", ylabel="validation accuracy (%)", title="validation accuracy")
    for ax in (loss_ax, acc_ax):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    run = next((r for r in records if r.get("event") == "run"), None)
    if run:
        config = run.get("config", {})
        fig.suptitle(f"{config.get('model', '?')} on {config.get('dataset', '?')}, {run.get('world_size', '?')} rank(s), "
                     f"run {run.get('run_id', '?')}")
    fig.tight_layout()
    # Through a temporary file, so a failed or killed plot never leaves half a PNG.
    partial = args.out + ".partial.png"
    fig.savefig(partial, dpi=100)
    os.replace(partial, args.out)
    print(f"plot_metrics: wrote {args.out} ({len(train)} train, {len(validation)} validation records)")


if __name__ == "__main__":
    main()
