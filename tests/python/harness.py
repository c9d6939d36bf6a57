"""What the Python tests share: dtrain.torch imported (or the test skipped, exit 77, when PyTorch is
missing), a seed every rank agrees on (printed; DTRAIN_TEST_SEED replays it), and checks that
collect failures so every rank reports all of them and the job's verdict is every rank's."""
import os
import random
import sys
import traceback

try:
    import torch
except ImportError:
    print("skipped: PyTorch is not installed for this interpreter (Debian: apt-get install python3-torch)")
    sys.exit(77)

import dtrain.torch as hvd

failures = []
# DTRAIN_TEST_DEVICE=cuda runs the tests on CUDA tensors, each rank on cuda:<local rank> (GPU machines:
# scripts/gpu_checks.sh). References stay on the CPU.
DEVICE = torch.device("cpu")


def start():
    """hvd.init(), then the seed, chosen by rank 0 (printed) and broadcast."""
    global DEVICE
    hvd.init()
    if os.environ.get("DTRAIN_TEST_DEVICE", "cpu") == "cuda":
        if not torch.cuda.is_available():
            print("skipped: DTRAIN_TEST_DEVICE=cuda, but torch sees no GPU")
            sys.exit(77)
        torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
        DEVICE = torch.device("cuda", torch.cuda.current_device())
    seed = int(os.environ.get("DTRAIN_TEST_SEED", random.randrange(1 << 30)))
    seed = hvd.broadcast_object(seed, root_rank=0, name="test.seed")
    if hvd.rank() == 0:
        print(f"{os.path.basename(sys.argv[0])}: {hvd.size()} rank(s) on {DEVICE.type}, seed {seed} (DTRAIN_TEST_SEED={seed} replays it)",
              flush=True)
    return seed


def check(condition, what):
    if not condition:
        failures.append(what)
        where = f"rank {hvd.rank()}" if hvd.is_initialized() else "a rank after shutdown"
        print(f"FAIL {where}: {what}", flush=True)


def equal(actual, expected, what, atol=0.0):
    """Exact (atol 0) or within atol, with dtype and shape compared too."""
    if not isinstance(actual, torch.Tensor):
        return check(False, f"{what}: got {type(actual).__name__}, not a tensor")
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return check(False, f"{what}: got {actual.dtype} {tuple(actual.shape)}, expected {expected.dtype} "
                            f"{tuple(expected.shape)}")
    a, e = actual.detach().cpu().double(), expected.detach().cpu().double()
    worst = float((a - e).abs().max()) if a.numel() else 0.0
    check(worst <= atol, f"{what}: largest difference {worst:g} > {atol:g}")


def raises(kind, text, function, what):
    """`function()` must raise `kind` whose message contains `text`."""
    try:
        function()
    except kind as e:
        check(text in str(e), f"{what}: {kind.__name__} without '{text}': {e}")
        return
    except Exception as e:  # noqa: BLE001 (reported as a failure)
        check(False, f"{what}: raised {type(e).__name__} ({e}), expected {kind.__name__}")
        return
    check(False, f"{what}: no {kind.__name__} raised")


def on_device(tensor):
    return tensor.to(DEVICE)


def finish(label, after_shutdown=None):
    """Every rank's failures counted together; exit 1 if any rank failed. `after_shutdown()`, checks of
    this rank alone once dtrain has stopped, fails this rank's exit status only."""
    try:
        total = hvd.allreduce(torch.tensor([len(failures)]), op=hvd.Sum, name="test.verdict").item()
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        total = len(failures) + 1
    if hvd.rank() == 0:
        print(f"{label}: {'all checks passed' if total == 0 else f'{total} failure(s)'} on {hvd.size()} rank(s)",
              flush=True)
    hvd.shutdown()
    if after_shutdown is not None:
        before = len(failures)
        after_shutdown()
        total += len(failures) - before
    sys.exit(0 if total == 0 else 1)
