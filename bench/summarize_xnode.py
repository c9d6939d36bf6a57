#!/usr/bin/env python3
"""The table of bench/run_gpu_xnode.sh from the JSON in its folder: ResNet-50 rows as images/s per
GPU, % of 1 GPU, the ceiling the measured link sets and the ratio to the PyTorch peer on the same
layout; the link's busbw at 64 MiB; dtrain-train synthetic and from files; Fashion-MNIST's top-1.
A missing run reads "no result" (that part was not run, or the run failed: see steps.txt).

    python3 bench/summarize_xnode.py DIR
"""
import glob
import json
import os
import statistics
import sys

# ResNet-50, 1000 classes: the gradient bytes a step all-reduces are 4 (fp32) or 2 (bf16, fp16) each.
RESNET50_PARAMETERS = 25_557_032
BATCH = 256
WIRE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}

# (file stem, label, nodes, ranks per node, backend; peer file stem for the ratio)
TRAIN_ROWS = [
    ("train_1gpu", "1 GPU", 1, 1, "-", "peer_1gpu"),
    ("train_4gpu_nccl", "4 GPUs, nccl, one node", 1, 4, "nccl", None),
    ("train_2x2_hier_default", "2x2 hierarchical, default wire", 2, 2, "hierarchical", "peer_2x2_sockets"),
    ("train_2x2_hier_fp32", "2x2 hierarchical, fp32 wire", 2, 2, "hierarchical", "peer_2x2_sockets"),
    ("train_2x2_hier_bf16", "2x2 hierarchical, bf16 wire", 2, 2, "hierarchical", "peer_2x2_sockets"),
    ("train_4x1_hier_bf16", "4x1 hierarchical, bf16 wire", 4, 1, "hierarchical", "peer_4x1_sockets"),
    ("train_4x1_ring_fp32", "4x1 staged mpi-ring, fp32 wire", 4, 1, "mpi-ring", "peer_4x1_sockets"),
    ("train_4x1_ring_bf16", "4x1 staged mpi-ring, bf16 wire", 4, 1, "mpi-ring", "peer_4x1_sockets"),
]
PEER_ROWS = [
    ("peer_1gpu", "1 GPU"),
    ("peer_2x2_sockets", "2x2, NCCL on sockets only"),
    ("peer_4x1_sockets", "4x1, NCCL on sockets only"),
    ("peer_2x2_nvlink_inside", "2x2, NVLink inside a node, sockets across"),
]
E2E_ROWS = [
    ("e2e_synthetic_1gpu", "synthetic, 1 GPU", "e2e_synthetic_1gpu"),
    ("e2e_synthetic_2x2", "synthetic, 2x2 hierarchical", "e2e_synthetic_1gpu"),
    ("e2e_jpeg_1gpu", "JPEG files, 1 GPU", "e2e_jpeg_1gpu"),
    ("e2e_jpeg_2x2", "JPEG files, 2x2 hierarchical", "e2e_jpeg_1gpu"),
    ("e2e_jpeg_4gpu_nccl", "JPEG files, 4 GPUs nccl", "e2e_jpeg_1gpu"),
]


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def per_gpu(directory, stem):
    """images/s per GPU of a dtrain-bench-train or peer JSON (the largest world size), or None."""
    j = load(os.path.join(directory, stem + ".json"))
    if isinstance(j, list):
        j = max(j, key=lambda r: r.get("world_size", 0)) if j else None
    return j.get("img_per_sec_per_gpu") if isinstance(j, dict) else None


def wire_of(directory, stem):
    j = load(os.path.join(directory, stem + ".json"))
    return j[0].get("gradient_wire_dtype") if isinstance(j, list) and j else None


def busbw_64m(path):
    """The best busbw (GB/s) at 64 MiB of a dtrain-bench-allreduce JSON (in place or not), or None."""
    j = load(path)
    rows = [r for r in (j or {}).get("results", []) if r.get("bytes") == 64 << 20 and not r.get("wrong")]
    return max(r["busbw_gbps"] for r in rows) if rows else None


def link_rounds(directory, kind):
    values = [busbw_64m(p) for p in sorted(glob.glob(os.path.join(directory, "link_%s_r*.json" % kind)))]
    return [v for v in values if v is not None]


def fmt(value, spec="%.1f", missing="-"):
    return spec % value if value is not None else missing


def link_ceiling(nodes, per_node, backend, wire, busbw, one_gpu):
    """images/s per GPU when a step takes max(compute, gradient all-reduce over the link) and the
    cross-node ring moves 2 (k-1)/k of its buffer at `busbw`: the whole gradient on a flat ring of k
    = all ranks, one shard in L (the ranks per node) on hierarchical's ring of k nodes."""
    if nodes < 2 or not busbw or not one_gpu or wire not in WIRE_BYTES:
        return None
    k, shard = (nodes * per_node, 1) if backend == "mpi-ring" else (nodes, per_node)
    comm_s = 2 * (k - 1) / k * RESNET50_PARAMETERS * WIRE_BYTES[wire] / shard / (busbw * 1e9)
    return BATCH / max(BATCH / one_gpu, comm_s)


def train_table(directory, busbw):
    one = per_gpu(directory, "train_1gpu")
    print("\n## dtrain-bench-train, ResNet-50 bf16, batch 256 per GPU (images/s per GPU)")
    print("link ceiling: 256 / max(1-GPU step, gradient bytes x 2(k-1)/k / shard / host mpi-ring busbw %s GB/s)" %
          fmt(busbw, "%.2f"))
    print("%-34s %9s %8s %13s %10s %9s" % ("run", "img/s/GPU", "of 1 GPU", "link ceiling", "of ceiling", "vs peer"))
    for stem, label, nodes, per_node, backend, peer in TRAIN_ROWS:
        rate = per_gpu(directory, stem)
        if rate is None:
            print("%-34s %s" % (label, "no result"))
            continue
        ceiling = link_ceiling(nodes, per_node, backend, wire_of(directory, stem), busbw, one)
        peer_rate = per_gpu(directory, peer) if peer else None
        print("%-34s %9.1f %8s %13s %10s %9s" % (
            label, rate, fmt(100 * rate / one if one else None, "%.1f%%"), fmt(ceiling),
            fmt(100 * rate / ceiling if ceiling else None, "%.1f%%"),
            fmt(rate / peer_rate if peer_rate else None, "%.2fx")))
    print("\n## peer: PyTorch DDP + torch.compile, bf16 b256 (bench/peers/pytorch_resnet50.py)")
    for stem, label in PEER_ROWS:
        rate = per_gpu(directory, stem)
        print("%-44s %s" % (label, fmt(rate, "%.1f img/s per GPU", "no result")))


def link_table(directory):
    host_ring, host_mpi, device_ring = (link_rounds(directory, k) for k in ("host_ring", "host_mpi", "device_ring"))
    print("\n## the link: 64 MiB fp32 all-reduce, 4 ranks as 4 simulated nodes, busbw GB/s (best of in/out of place)")
    print("%-36s %s" % ("host mpi-ring (rounds)", " ".join("%.2f" % v for v in host_ring) or "no result"))
    print("%-36s %s" % ("host MPI_Allreduce (rounds)", " ".join("%.2f" % v for v in host_mpi) or "no result"))
    print("%-36s %s" % ("device staged mpi-ring (rounds)", " ".join("%.2f" % v for v in device_ring) or "no result"))
    print("%-36s %s" % ("device nccl, sockets only", fmt(busbw_64m(os.path.join(directory, "link_nccl_sockets.json")),
                                                          "%.2f", "no result")))
    pairs = [d / h for d, h in zip(device_ring, host_ring) if h]
    if pairs:
        ratio = statistics.median(pairs)
        print("staged / host mpi-ring, round by round: %s; median %.1f%% (bar: >= 90%%: %s)" % (
            " ".join("%.1f%%" % (100 * p) for p in pairs), 100 * ratio, "met" if ratio >= 0.9 else "NOT met"))
    return statistics.median(host_ring) if host_ring else None


def last_validation(directory, stem):
    last = None
    try:
        with open(os.path.join(directory, stem + ".jsonl")) as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if record.get("event") == "validation":
                    last = record
    except OSError:
        pass
    return last


def e2e_table(directory):
    one_bench = per_gpu(directory, "train_1gpu")
    print("\n## dtrain-train, ResNet-50 bf16 b256: the last epoch's median step, images/s per GPU")
    print("%-32s %9s %15s %22s" % ("run", "img/s/GPU", "of its 1 GPU", "of bench-train 1 GPU"))
    for stem, label, base in E2E_ROWS:
        v = last_validation(directory, stem)
        if v is None:
            print("%-32s %s" % (label, "no result"))
            continue
        rate = v.get("img_per_sec_per_rank")
        b = last_validation(directory, base)
        base_rate = b.get("img_per_sec_per_rank") if b else None
        print("%-32s %9.1f %15s %22s" % (label, rate, fmt(100 * rate / base_rate if base_rate else None, "%.1f%%"),
                                        fmt(100 * rate / one_bench if one_bench else None, "%.1f%%")))


def fmnist_table(directory):
    print("\n## Fashion-MNIST, shipped config, 15 epochs, global batch 64 (4 x 16), top-1 at the last epoch")
    tops = {}
    for stem, label in (("fmnist_2x2", "2x2, default backend and wire"), ("fmnist_4gpu_nccl", "4 GPUs, nccl")):
        v = last_validation(directory, stem)
        if v is None:
            print("%-32s %s" % (label, "no result"))
            continue
        tops[stem] = 100 * v["top1"]
        print("%-32s epoch %d: top-1 %.2f%%" % (label, v["epoch"], tops[stem]))
    if len(tops) == 2:
        gap = tops["fmnist_4gpu_nccl"] - tops["fmnist_2x2"]
        ok = tops["fmnist_2x2"] >= 92.8 and gap <= 0.3
        print("bar: 2x2 >= 92.8%% and within 0.3 pt of nccl (gap %.2f pt): %s" % (gap, "met" if ok else "NOT met"))


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: summarize_xnode.py DIR (the XNODE_DIR of bench/run_gpu_xnode.sh)")
    directory = sys.argv[1]
    for name in ("machine.txt", "steps.txt"):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            print("# %s\n%s" % (name, open(path).read().rstrip()))
    busbw = link_table(directory)
    train_table(directory, busbw)
    e2e_table(directory)
    fmnist_table(directory)


if __name__ == "__main__":
    main()
