#!/usr/bin/env python3
"""A new 10-class task made from Fashion-MNIST, for the fine-tuning test.

    make_transfer_task.py new|pretrain SRC_DIR OUT_DIR TRAIN_IMAGES TEST_IMAGES

"new": every image turned upside down (rotated 180 degrees) and the classes renumbered,
new label = (3 x label + 1) mod 10, so a network pretrained on upright Fashion-MNIST has useful
features (edges, garment parts) for images it never saw the right way up, while its classifier is
of no use: fine-tuning must start the classifier afresh. Written from the first images of each
split. "pretrain": Fashion-MNIST itself from the images after those, so the pretrained network
never saw the new task's images. Files: OUT_DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz.
Deterministic (no randomness); standard library only.
"""
import gzip
import os
import struct
import sys


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, count = struct.unpack(">II", data[:8])
    dims = (magic & 0xFF)
    shape = struct.unpack(">" + "I" * (dims - 1), data[8:4 + 4 * dims]) if dims > 1 else ()
    return count, shape, data[4 + 4 * dims:]


def write_idx(path, magic, dims, payload):
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + payload)


def make(src, out, split, first, n, new_task):
    count, (rows, cols), pixels = read_idx(f"{src}/{split}-images-idx3-ubyte.gz")
    _, _, labels = read_idx(f"{src}/{split}-labels-idx1-ubyte.gz")
    n = min(n, count - first)
    size = rows * cols
    images, new_labels = bytearray(), bytearray()
    for i in range(first, first + n):
        image = pixels[i * size:(i + 1) * size]
        images += image[::-1] if new_task else image  # reversed pixel order: rotated 180 degrees
        new_labels.append((3 * labels[i] + 1) % 10 if new_task else labels[i])
    write_idx(f"{out}/{split}-images-idx3-ubyte.gz", 0x00000803, (n, rows, cols), bytes(images))
    write_idx(f"{out}/{split}-labels-idx1-ubyte.gz", 0x00000801, (n,), bytes(new_labels))


def main():
    if len(sys.argv) != 6 or sys.argv[1] not in ("new", "pretrain"):
        sys.exit(__doc__)
    mode, src, out, train, test = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    os.makedirs(out, exist_ok=True)
    if mode == "new":
        make(src, out, "train", 0, train, True)
        make(src, out, "t10k", 0, test, True)
    else:  # Fashion-MNIST after the new task's images
        make(src, out, "train", train, 60000, False)
        make(src, out, "t10k", test, 10000, False)


if __name__ == "__main__":
    main()
