#!/usr/bin/env python3
"""dtrain's weights in torchvision and back, on the GPU machine:

    check_torchvision_weights.py BIN TESTS OUT "MPIRUN..."

1. Export: dtrain-train trains a ResNet-50 for 3 steps on the GPU (bf16, synthetic 64x64 images),
   dtrain-export writes its final weights; torchvision.models.resnet50().load_state_dict(...,
   strict=True) takes them; on one fixed batch torchvision's eval-mode logits (fp32 on the GPU,
   TF32 off) match dtrain's (dtrain-eval-logits: the CPU reference network, fp32) within fp32
   tolerance; num_batches_tracked is the step count.
2. Import: a torchvision ResNet-50 with random weights and BN statistics, saved in safetensors,
   gives dtrain the same logits (dtrain-eval-logits with the file as weights).
3. Import and freezing on the GPU: dtrain-train --init-weights (that file) --freeze-backbone-epochs 1
   trains 2 steps on the GPU; exported again, every backbone parameter is the file's bit for bit and
   the classifier moved.
The safetensors files are read and written here with the standard library and torch (the format's
header is JSON), so no safetensors package is needed; where one is installed it reads them too.
Prints PASS or FAIL lines; exits 1 on any failure.
"""
import json
import os
import struct
import subprocess
import sys

import torch
import torchvision

DTYPES = {"F32": torch.float32, "I64": torch.int64, "F16": torch.float16, "BF16": torch.bfloat16}
NAMES = {v: k for k, v in DTYPES.items()}
failures = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def read_safetensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = memoryview(data)[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(body[begin:end]), dtype=DTYPES[e["dtype"]]) if end > begin else \
            torch.empty(0, dtype=DTYPES[e["dtype"]])
        out[name] = t.reshape(e["shape"])
    return out, header.get("__metadata__", {})


def write_safetensors(path, tensors):
    header, chunks, offset = {}, [], 0
    for name, t in tensors.items():
        raw = t.detach().cpu().contiguous().numpy().tobytes()
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def run(*args):
    print("$ " + " ".join(args), flush=True)
    done = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(done.stdout[-3000:], flush=True)
    if done.returncode != 0:
        raise SystemExit(f"FAIL: {args[0]} exited {done.returncode}")
    return done.stdout


def newest_checkpoint(run_dir):
    files = sorted(f for f in os.listdir(run_dir) if f.startswith("ckpt-") and f.endswith(".dtrain"))
    return os.path.join(run_dir, files[-1])


def torchvision_logits(state_dict, images):
    model = torchvision.models.resnet50()
    try:
        model.load_state_dict(state_dict, strict=True)
        check(True, "torchvision resnet50 load_state_dict(strict=True)")
    except RuntimeError as e:
        check(False, f"torchvision resnet50 load_state_dict(strict=True): {e}")
        raise SystemExit(1)
    model = model.cuda().eval().float()
    with torch.no_grad():
        return model(images.cuda()).cpu()


def compare_logits(ours, theirs, what):
    scale = theirs.abs().max().item()
    worst = (ours - theirs).abs().max().item()
    print(f"{what}: logits {tuple(ours.shape)}, max |logit| {scale:.4g}, max |difference| {worst:.3g} "
          f"({worst / max(scale, 1e-30):.3g} relative); top-1 agree on {(ours.argmax(1) == theirs.argmax(1)).sum().item()}"
          f" of {ours.shape[0]}")
    check(worst <= 1e-4 * max(scale, 1.0), f"{what}: logits match within fp32 tolerance (1e-4 of the largest)")


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    bin_dir, tests_dir, out, mpirun = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
    os.makedirs(out, exist_ok=True)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    train = [*mpirun, "-np", "1", f"{bin_dir}/dtrain-train", "--model", "resnet", "--depth", "50",
             "--dataset", "synthetic", "--image-size", "64", "--synthetic-samples", "64", "--batch-per-rank", "8",
             "--epochs", "1", "--log-every-steps", "1", "--max-validation-batches", "1", "--device", "gpu"]
    export = f"{bin_dir}/dtrain-export"
    logits_tool = f"{tests_dir}/dtrain-eval-logits"

    # 1. Export.
    run(*train, "--max-total-steps", "3", "--run-dir", f"{out}/trained")
    ckpt = newest_checkpoint(f"{out}/trained")
    run(export, ckpt, "--format", "safetensors", f"{out}/resnet50.safetensors")
    state, meta = read_safetensors(f"{out}/resnet50.safetensors")
    check(len(state) == 320, f"320 tensors in the exported file (has {len(state)})")
    check(int(state["bn1.num_batches_tracked"]) == 3, "num_batches_tracked is the step count (3)")
    try:
        import safetensors.torch
        other = safetensors.torch.load_file(f"{out}/resnet50.safetensors")
        check(all(torch.equal(other[k], state[k]) for k in state), "the safetensors package reads the same tensors")
    except ImportError:
        print("(no safetensors package here: the file was read by this script's reader only)")
    torch.manual_seed(0)
    images = torch.randn(8, 3, 64, 64)
    write_safetensors(f"{out}/images.safetensors", {"images": images})
    run(logits_tool, ckpt, f"{out}/images.safetensors", f"{out}/dtrain_logits.safetensors")
    ours = read_safetensors(f"{out}/dtrain_logits.safetensors")[0]["logits"]
    compare_logits(ours, torchvision_logits(state, images), "export (dtrain-train on the GPU -> torchvision)")

    # 2. Import: torchvision's random initialization with BN statistics that matter.
    torch.manual_seed(1)
    model = torchvision.models.resnet50()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.0)
                m.bias.uniform_(-0.1, 0.1)
                m.num_batches_tracked.fill_(100)
    tv_state = {k: v.clone() for k, v in model.state_dict().items()}
    write_safetensors(f"{out}/torchvision_init.safetensors", tv_state)
    run(logits_tool, ckpt, f"{out}/images.safetensors", f"{out}/dtrain_logits_import.safetensors",
        f"{out}/torchvision_init.safetensors")
    ours = read_safetensors(f"{out}/dtrain_logits_import.safetensors")[0]["logits"]
    compare_logits(ours, torchvision_logits(tv_state, images), "import (torchvision -> dtrain)")

    # 3. Import and a frozen backbone on the GPU.
    run(*train, "--max-total-steps", "2", "--run-dir", f"{out}/fine_tuned", "--init-weights",
        f"{out}/torchvision_init.safetensors", "--freeze-backbone-epochs", "1")
    run(export, newest_checkpoint(f"{out}/fine_tuned"), "--format", "safetensors", f"{out}/fine_tuned.safetensors")
    tuned = read_safetensors(f"{out}/fine_tuned.safetensors")[0]
    params = [k for k in tv_state if not k.endswith(("running_mean", "running_var", "num_batches_tracked"))]
    moved = [k for k in params if not k.startswith("fc.") and not torch.equal(tuned[k], tv_state[k])]
    check(not moved, f"GPU, frozen backbone: every backbone parameter is the file's bit for bit ({len(moved)} moved"
          + (f", e.g. {moved[0]})" if moved else ")"))
    check(not torch.equal(tuned["fc.weight"], tv_state["fc.weight"]), "GPU, frozen backbone: the classifier trained")
    stats_moved = sum(not torch.equal(tuned[k], tv_state[k]) for k in tv_state if k.endswith("running_mean"))
    check(stats_moved > 0, f"GPU, frozen backbone: BN running statistics follow the data ({stats_moved} of 53 moved)")

    print("PASS torchvision weights" if not failures else f"FAIL {len(failures)} check(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
