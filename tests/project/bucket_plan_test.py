#!/usr/bin/python3
"""bench/project/bucket_plan.py against the engine's own plan (comm/gradient_sync/bucket_plan.cc,
through bucket_plan_cuts): the same cuts on awkward counts (0, 1, 7919, 2^20+3), sizes (tail or
first 0, larger than the buffer, under one element) and fresh random parameter layouts with
alignment gaps (the seed is printed).
Run: /usr/bin/python3 tests/project/bucket_plan_test.py BUILD/bin/tests/dtrain-bucket-plan-cuts"""
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "project"))
from bucket_plan import plan_cuts  # noqa: E402

SEED = int(os.environ.get("DTRAIN_TEST_SEED", random.SystemRandom().randrange(1 << 30)))


def layout(count, rng):
    """Parameters of random sizes, each starting 4-aligned (the gaps backward never reports)."""
    ranges, at = [], 0
    while at < count:
        size = min(count - at, rng.choice([1, 3, 64, 1000, 7919, 65536, 300000]))
        ranges.append((at, at + size))
        at = (at + size + 3) // 4 * 4
    return ranges


def cases(rng):
    mib = 1 << 20
    for count in (0, 1, 7919, (1 << 20) + 3, 3 * (1 << 20) + 1):
        for body, tail, first in ((4 * 1024, 1024, 0), (mib, 4 * 1024, 2 * 1024), (12, 0, 0), (mib, 0, 8 * 1024),
                                  (64 * 1024, 64 * mib, 0), (4, 4, 4), (rng.randrange(4, 1 << 22),
                                  rng.randrange(0, 1 << 20), rng.randrange(0, 1 << 20))):
            for ranges in ([], layout(count, rng)):
                yield count, body, tail, first, ranges


def main():
    print(f"seed {SEED}")
    rng = random.Random(SEED)
    all_cases = list(cases(rng))
    text = "".join(f"{c} {b} {t} {f} {len(r)} {' '.join(f'{x} {y}' for x, y in r)}\n" for c, b, t, f, r in all_cases)
    out = subprocess.run([sys.argv[1]], input=text, capture_output=True, text=True, check=True).stdout
    lines = out.split("\n")[:len(all_cases)]
    assert len(lines) == len(all_cases), (len(lines), len(all_cases))
    for (count, body, tail, first, ranges), line in zip(all_cases, lines):
        want = [int(x) for x in line.split()]
        got = plan_cuts(count, body // 4, tail // 4, first // 4, ranges)
        assert got == want, (f"seed {SEED}: count {count}, body {body} B, tail {tail} B, first {first} B, "
                              f"{len(ranges)} ranges: python {got[:12]}..., C++ {want[:12]}...")
    print(f"PASS: {len(all_cases)} plans agree")


if __name__ == "__main__":
    main()
