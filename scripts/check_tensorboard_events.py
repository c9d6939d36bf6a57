#!/usr/bin/env python3
"""Loads a --tensorboard_dir with TensorBoard's own reader (EventAccumulator) and checks that it
finds dtrain-train's scalars and its config text: the check that our event files are TensorBoard's
format, run where TensorBoard is installed (scripts/gpu_checks.sh on the GPU machines).
   check_tensorboard_events.py DIR STEPS   (STEPS: the global steps of the progress lines, comma list)
"""
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

TRAIN = ["train/loss", "train/lr", "train/images_per_sec", "train/data_wait_fraction"]
EPOCH = ["validation/top1", "validation/top5", "validation/loss", "train/epoch_loss", "train/epoch_images_per_sec"]


def main():
    directory, steps = sys.argv[1], [int(s) for s in sys.argv[2].split(",")]
    acc = EventAccumulator(directory, size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    tags = acc.Tags()
    print("tags:", {kind: sorted(names) for kind, names in tags.items() if names})
    problems = []
    for tag in TRAIN:
        if tag not in tags["scalars"]:
            problems.append(f"no scalar {tag}")
            continue
        got = [e.step for e in acc.Scalars(tag)]
        if got != steps:
            problems.append(f"{tag} at steps {got}, expected {steps}")
    for tag in EPOCH:
        if tag not in tags["scalars"]:
            problems.append(f"no scalar {tag}")
    for e in acc.Scalars("train/loss") if "train/loss" in tags["scalars"] else []:
        print(f"train/loss step {e.step}: {e.value:.6f}")
    if "config" not in tags["tensors"]:
        problems.append("no config text")
    else:
        text = acc.Tensors("config")[0].tensor_proto.string_val[0].decode()
        print("config text, first line:", text.splitlines()[0])
        if "model:" not in text:
            problems.append("the config text has no model field")
        plugin = acc.SummaryMetadata("config").plugin_data.plugin_name
        if plugin != "text":
            problems.append(f"config's plugin is {plugin!r}, not 'text'")
    for p in problems:
        print("FAIL:", p)
    print("PASS" if not problems else "FAIL")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
