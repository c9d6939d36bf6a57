#!/usr/bin/env python3
"""Damaged copies of a good safetensors file (dtrain-export's) for the hostile-input suite:

    damage_safetensors.py GOOD.safetensors OUT_DIR

missing_tensor (layer1.0.bn1.running_var dropped), extra_tensor (layer9.0.conv1.weight added),
wrong_shape (conv1.weight's dimensions swapped), wrong_dtype (conv1.weight as F16),
other_classes (fc of 10 classes), overlapping (fc.bias's bytes claimed by the next tensor too),
cut_short (the last 100 bytes gone), header_too_long (a header length past the file's end),
nan_value (layer1.0.conv1.weight's element 5 a NaN).
Standard library only; the tensors' bytes are copied, not interpreted.
"""
import json
import os
import struct
import sys


def read(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    tensors = [(name, e["dtype"], e["shape"], body[e["data_offsets"][0]:e["data_offsets"][1]])
               for name, e in header.items() if name != "__metadata__"]
    return tensors


def write(path, tensors, shift=None):
    header, body = {}, b""
    for name, dtype, shape, raw in tensors:
        begin = len(body)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [begin, begin + len(raw)]}
        body += raw
    if shift is not None:  # the tensor after `shift` starts 4 bytes early: it overlaps `shift`
        names = [t[0] for t in tensors]
        after = names[names.index(shift) + 1]
        header[after]["data_offsets"][0] -= 4
        header[after]["data_offsets"][1] -= 4
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + body)


def replaced(tensors, name, **changes):
    out = []
    for t in tensors:
        if t[0] == name:
            t = (t[0], changes.get("dtype", t[1]), changes.get("shape", t[2]), changes.get("raw", t[3]))
        out.append(t)
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    good, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    t = read(good)
    by = {name: (dtype, shape, raw) for name, dtype, shape, raw in t}
    write(f"{out}/missing_tensor.safetensors", [x for x in t if x[0] != "layer1.0.bn1.running_var"])
    write(f"{out}/extra_tensor.safetensors", t + [("layer9.0.conv1.weight", "F32", [1], b"\0" * 4)])
    shape = by["conv1.weight"][1]
    write(f"{out}/wrong_shape.safetensors", replaced(t, "conv1.weight", shape=[shape[1], shape[0]] + shape[2:]))
    raw = by["conv1.weight"][2]
    write(f"{out}/wrong_dtype.safetensors", replaced(t, "conv1.weight", dtype="F16", raw=raw[:len(raw) // 2]))
    features = by["fc.weight"][1][1]
    fc = replaced(t, "fc.weight", shape=[10, features], raw=b"\0" * (40 * features))
    write(f"{out}/other_classes.safetensors", replaced(fc, "fc.bias", shape=[10], raw=b"\0" * 40))
    # Overlap: shift the tensor after fc.bias 4 bytes into it; the file keeps its length, so only the
    # ranges' overlap is wrong (and a gap of 4 bytes at the end).
    write(f"{out}/overlapping.safetensors", t, shift="fc.bias")
    raw = by["layer1.0.conv1.weight"][2]
    nan = raw[:20] + struct.pack("<f", float("nan")) + raw[24:]
    write(f"{out}/nan_value.safetensors", replaced(t, "layer1.0.conv1.weight", raw=nan))
    data = open(good, "rb").read()
    open(f"{out}/cut_short.safetensors", "wb").write(data[:-100])
    open(f"{out}/header_too_long.safetensors", "wb").write(struct.pack("<Q", len(data)) + data[8:])


if __name__ == "__main__":
    main()
