"""dtrain-project's input files, read once and checked: the step profile (dtrain-train or
dtrain-bench-train --profile-out, train/observe/step_profile.h) and the machine description
(tiers fitted by --fit). Every mistake is an InputError naming the file and the field."""
import json
import math
from dataclasses import dataclass

from collectives import Tier

PROFILE_FORMAT, PROFILE_VERSION = "dtrain-step-profile", 1
MACHINE_FORMAT, MACHINE_VERSION = "dtrain-machine", 1


class InputError(Exception):
    pass


def load_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise InputError(f"{what} {path}: no such file")
    except OSError as e:
        raise InputError(f"{what} {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        raise InputError(f"{what} {path}: not valid JSON (truncated?): {e}")


def field(data, key, path, kind=float, positive=True, allow_zero=False):
    """data[key] as `kind`, present, finite and (by default) above zero."""
    if not isinstance(data, dict) or key not in data:
        raise InputError(f"{path}: field '{key}' is missing")
    value = data[key]
    if kind is str:
        if not isinstance(value, str) or not value:
            raise InputError(f"{path}: field '{key}' must be a non-empty string, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{path}: field '{key}' must be a number, got {value!r}")
    if not math.isfinite(value):
        raise InputError(f"{path}: field '{key}' is not finite")
    if kind is int and value != int(value):
        raise InputError(f"{path}: field '{key}' must be a whole number, got {value}")
    if positive and (value < 0 or (value == 0 and not allow_zero)):
        raise InputError(f"{path}: field '{key}' must be {'>= 0' if allow_zero else '> 0'}, got {value}")
    return kind(value)


def check_format(data, path, fmt, version):
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object of format '{fmt}'")
    if data.get("format") != fmt:
        raise InputError(f"{path}: field 'format' is {data.get('format')!r}, expected '{fmt}'")
    if data.get("version") != version:
        raise InputError(f"{path}: field 'version' is {data.get('version')!r}; this dtrain-project reads {version}")


@dataclass
class Profile:
    path: str
    batch: int
    device: str
    model: str
    forward: float  # seconds
    backward: float
    optimizer: float
    step: float  # the run's measured median step; 0: none
    ranges: list  # [(offset, bytes, ready seconds after backward began)] in backward order
    total_bytes: int
    # The run's tail and first bucket sizes; None: a profile written before the engine had them.
    tail_bytes: int = None
    first_bytes: int = None


def load_profile(path):
    d = load_json(path, "profile")
    check_format(d, path, PROFILE_FORMAT, PROFILE_VERSION)
    bpe = field(d, "gradient_bytes_per_element", path, int)
    ranges = []
    grads = d.get("gradients")
    if not isinstance(grads, list) or not grads:
        raise InputError(f"{path}: field 'gradients' must be a non-empty list")
    for i, g in enumerate(grads):
        where = f"{path}: gradients[{i}]"
        offset = field(g, "offset", where, int, allow_zero=True)
        elements = field(g, "elements", where, int)
        ready = field(g, "ready_ms", where, float, allow_zero=True) * 1e-3
        ranges.append((offset * bpe, elements * bpe, ready))
    total = max(o + b for o, b, _ in ranges)
    return Profile(path=path, batch=field(d, "batch_per_gpu", path, int), device=field(d, "device", path, str),
                   model=field(d, "model", path, str), forward=field(d, "forward_ms", path) * 1e-3,
                   backward=field(d, "backward_ms", path) * 1e-3,
                   optimizer=field(d, "optimizer_ms", path, allow_zero=True) * 1e-3,
                   step=field(d, "step_ms", path, allow_zero=True) * 1e-3, ranges=ranges, total_bytes=total,
                   tail_bytes=optional_size(d, "tail_bucket_bytes", path),
                   first_bytes=optional_size(d, "first_bucket_bytes", path))


def optional_size(d, key, path):
    return field(d, key, path, int, allow_zero=True) if key in d else None


@dataclass
class Machine:
    path: str
    name: str
    gpus_per_node: int
    intra: Tier
    inter: Tier
    inter_host: Tier  # the host-staged path of hierarchical and mpi-ring (default: inter)
    tree_bandwidth_fraction: float
    shared_link: bool = True  # a node's GPUs share its network link (False: simulated nodes on one host)


def load_tier(d, key, path):
    t = d.get(key)
    where = f"{path}: {key}"
    if not isinstance(t, dict):
        raise InputError(f"{path}: field '{key}' is missing (an object with alpha_us and bandwidth_gbps)")
    return Tier(alpha=field(t, "alpha_us", where, allow_zero=True) * 1e-6,
                beta=1.0 / (field(t, "bandwidth_gbps", where) * 1e9))


def load_machine(path):
    d = load_json(path, "machine")
    check_format(d, path, MACHINE_FORMAT, MACHINE_VERSION)
    inter = load_tier(d, "inter", path)
    fraction = field(d, "tree_bandwidth_fraction", path) if "tree_bandwidth_fraction" in d else 1.0
    if fraction > 1:
        raise InputError(f"{path}: field 'tree_bandwidth_fraction' must be in (0, 1], got {fraction}")
    return Machine(path=path, name=d.get("name", path), gpus_per_node=field(d, "gpus_per_node", path, int),
                   intra=load_tier(d, "intra", path), inter=inter,
                   inter_host=load_tier(d, "inter_host", path) if "inter_host" in d else inter,
                   tree_bandwidth_fraction=fraction, shared_link=shared_link(d, path))


def shared_link(d, path):
    value = d.get("inter_shared_by_node", True)
    if not isinstance(value, bool):
        raise InputError(f"{path}: field 'inter_shared_by_node' must be true or false, got {value!r}")
    return value


def tier_json(tier, **extra):
    out = {"alpha_us": round(tier.alpha * 1e6, 3), "bandwidth_gbps": round(tier.bandwidth / 1e9, 4)}
    out.update(extra)
    return out
