#!/usr/bin/python3
"""dtrain-project's model against hand-computed cases, --fit recovering alpha and beta from
synthetic curves (fresh random tiers and noise each run; the seed is printed), and its bad inputs
named by file and field. Run: /usr/bin/python3 tests/project/projection_test.py"""
import json
import math
import os
import random
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "project"))
import collectives as c  # noqa: E402
import fit  # noqa: E402
import inputs  # noqa: E402
import projection as pj  # noqa: E402

SEED = int(os.environ.get("DTRAIN_TEST_SEED", random.SystemRandom().randrange(1 << 30)))
print(f"projection_test: seed {SEED} (DTRAIN_TEST_SEED={SEED} repeats it)")


class Machine:
    def __init__(self, intra, inter, inter_host=None, local=8, fraction=1.0):
        self.intra, self.inter, self.inter_host = intra, inter, inter_host or inter
        self.gpus_per_node, self.tree_bandwidth_fraction, self.path = local, fraction, "test-machine"
        self.shared_link = True


INTRA = c.Tier(alpha=2e-6, beta=1 / 200e9)
INTER = c.Tier(alpha=10e-6, beta=1 / 50e9)


class Formulas(unittest.TestCase):
    def test_ring_by_hand(self):
        cost = c.ring(4, 1e6, c.Tier(1e-5, 1e-9))
        self.assertAlmostEqual(cost.parts["intra latency"], 6e-5, delta=1e-15)  # 2 x 3 x 10 us
        self.assertAlmostEqual(cost.parts["intra bandwidth"], 1.5e-3, delta=1e-15)  # 2 x 3/4 x 1 MB x 1 ns
        self.assertEqual(c.ring(1, 1e6, INTRA).total, 0.0)

    def test_ring_across_nodes_by_hand(self):
        # 2 nodes x 4: 14 steps of the inter alpha; each step's 1 MB through the node link (50 GB/s)
        cost = c.ring_across_nodes(2, 4, 8e6, INTRA, INTER)
        self.assertAlmostEqual(cost.parts["inter latency"], 14 * 10e-6, delta=1e-15)
        self.assertAlmostEqual(cost.parts["inter bandwidth"], 14 * 1e6 / 50e9, delta=1e-15)
        self.assertEqual(cost.parts["intra bandwidth"], 0.0)

    def test_tree_by_hand(self):
        # 8 nodes x 8: depth 3 both ways, a chain of 7 hops both ways, 2n through the node link at 90%
        cost = c.nccl_tree(8, 8, 1e8, INTRA, INTER, 0.9)
        self.assertAlmostEqual(cost.parts["inter latency"], 6 * 10e-6, delta=1e-15)
        self.assertAlmostEqual(cost.parts["intra latency"], 14 * 2e-6, delta=1e-15)
        self.assertAlmostEqual(cost.parts["inter bandwidth"], 2e8 / 50e9 / 0.9, delta=1e-12)

    def test_hierarchical_by_hand(self):
        # 4 nodes x 2, bf16 wire: intra ring of 2 on n, inter ring of 4 on n/2 per rank, 2 ranks sharing
        n = 1e8
        cost = c.hierarchical(4, 2, n, INTRA, INTER, 0.5)
        self.assertAlmostEqual(cost.parts["intra latency"], 2 * 2e-6, delta=1e-15)
        self.assertAlmostEqual(cost.parts["intra bandwidth"], n / 200e9, delta=1e-12)
        self.assertAlmostEqual(cost.parts["inter latency"], 6 * 10e-6, delta=1e-15)
        self.assertAlmostEqual(cost.parts["inter bandwidth"], 2 * 3 / 4 * n * 0.5 / 50e9, delta=1e-12)
        # each rank on a path of its own: half the bytes per path
        own = c.hierarchical(4, 2, n, INTRA, INTER, 0.5, shared_link=False)
        self.assertAlmostEqual(own.parts["inter bandwidth"], 2 * 3 / 4 * n / 2 * 0.5 / 50e9, delta=1e-12)

    def test_nccl_takes_the_faster_and_auto_is_hierarchical_across_nodes(self):
        m = Machine(INTRA, INTER)
        for nodes, n in ((512, 1e4), (2, 1e9)):
            got = c.allreduce("nccl", nodes, 8, n, m).total
            ring = c.ring_across_nodes(nodes, 8, n, INTRA, INTER).total
            tree = c.nccl_tree(nodes, 8, n, INTRA, INTER, 1.0).total
            self.assertEqual(got, min(ring, tree))
        self.assertEqual(c.allreduce("auto", 4, 2, 1e8, m).total, c.hierarchical(4, 2, 1e8, INTRA, INTER, 1.0).total)

    def test_mpi_ring_carries_the_wire_format_on_every_hop(self):
        # 4 nodes x 1, bf16 wire: 6 steps of the inter alpha, each step's n/4 in 2-byte values (half)
        m = Machine(INTRA, INTER, local=1)
        n = 8e6
        cost = c.allreduce("mpi-ring", 4, 1, n, m, "bf16")
        self.assertAlmostEqual(cost.parts["inter latency"], 6 * 10e-6, delta=1e-15)
        self.assertAlmostEqual(cost.parts["inter bandwidth"], 6 * n / 4 * 0.5 / 50e9, delta=1e-15)
        fp32 = c.allreduce("mpi-ring", 4, 1, n, m, "fp32")
        self.assertAlmostEqual(fp32.parts["inter bandwidth"], 2 * cost.parts["inter bandwidth"], delta=1e-15)

    def test_buckets_by_hand(self):
        # ranges (offset, bytes, ready): buckets of 100 bytes; bucket 1 waits for the range ending in it
        ranges = [(0, 60, 0.1), (60, 60, 0.2), (120, 100, 0.3), (220, 12, 0.4)]
        self.assertEqual(pj.buckets(ranges, 100), [(100, 0.2), (100, 0.3), (32, 0.4)])
        # a first bucket of 40 bytes, a tail of 16: its cut at 216 stays (the boundary at 220 is one
        # element away, not under an eighth of the tail plus one); the gap 216..220 holds nothing back
        ranges = [(0, 60, 0.1), (60, 60, 0.2), (120, 96, 0.3), (220, 12, 0.4)]
        self.assertEqual(pj.buckets(ranges, 100, tail_bytes=16, first_bytes=40),
                         [(40, 0.1), (100, 0.3), (76, 0.3), (16, 0.4)])
        # the cut at 100 bytes (25 elements) moves to the boundary at 88 (3 elements away, under 4)
        self.assertEqual(pj.buckets([(0, 88, 0.1), (88, 112, 0.2)], 100), [(88, 0.1), (100, 0.2), (12, 0.2)])

    def test_a_smaller_tail_shortens_the_projected_tail(self):
        # 32 ranges of 1 MiB: backward writes the first 31 by 10 ms, the last at its end (20 ms)
        mib = 1 << 20
        ranges = [(i * mib, mib, 0.010 * (i + 1) / 31 if i < 31 else 0.020) for i in range(32)]
        prof = inputs.Profile("p", 32, "dev", "m", 0.010, 0.020, 0.001, 0.0, ranges, 32 * mib)
        slow = c.Tier(10e-6, 1 / 10e9)
        m = Machine(INTRA, slow, local=1)
        exposed = {}
        for tail in (0, 4, 1):
            step = pj.project([prof], m, pj.Layout(2, 1, "nccl-ring", "fp32", 8 * mib, 32, tail * mib))
            exposed[tail] = step.exposed
            self.assertAlmostEqual(step.seconds, 0.031 + step.exposed, delta=1e-12)
        # equal buckets leave the last 8 MiB after backward; the tail bucket only itself
        self.assertAlmostEqual(exposed[0], c.ring(2, 8 * mib, slow, "inter").total, delta=1e-12)
        self.assertAlmostEqual(exposed[4], c.ring(2, 4 * mib, slow, "inter").total, delta=1e-12)
        self.assertAlmostEqual(exposed[1], c.ring(2, mib, slow, "inter").total, delta=1e-12)
        self.assertLess(exposed[1], exposed[4])
        self.assertLess(exposed[4], exposed[0])

    def test_overlap_by_hand(self):
        # costs 1 s per bucket: ready at 0, 0.5, 3 -> ends at 1, 2, 4
        end, parts = pj.overlap([(1, 0.0), (1, 0.5), (1, 3.0)], lambda n: c.Cost().add("inter bandwidth", 1.0))
        self.assertEqual(end, 4.0)
        self.assertEqual(parts["inter bandwidth"], 3.0)

    def test_batch_interpolation(self):
        pts = [(16, 4.0), (64, 10.0), (256, 34.0)]
        self.assertEqual(pj._at_batch(64, pts), 10.0)
        self.assertAlmostEqual(pj._at_batch(160, pts), 22.0)  # halfway between 64 and 256
        self.assertAlmostEqual(pj._at_batch(400, pts), 52.0)  # the last segment's slope
        self.assertAlmostEqual(pj._at_batch(8, pts), 3.0)  # linear below, inside [share, smallest]
        self.assertAlmostEqual(pj._at_batch(128, [(256, 40.0)]), 20.0)

    def test_step_exposes_only_the_tail(self):
        prof = inputs.Profile("p", 32, "dev", "m", 0.010, 0.020, 0.001, 0.0,
                              [(0, 4 << 20, 0.005), (4 << 20, 4 << 20, 0.020)], 8 << 20)
        slow = c.Tier(10e-6, 1 / 1e9)  # 4 MiB take 4.2 ms: 13% of the step, a visible tail
        m = Machine(INTRA, slow, local=1)
        lay = pj.Layout(2, 1, "nccl-ring", "fp32", 4 << 20, 32, tail_bytes=0)  # equal buckets
        step = pj.project([prof], m, lay)
        each = c.ring(2, 4 << 20, slow, "inter").total
        # the first bucket hides under backward; the second starts at backward's end
        self.assertAlmostEqual(step.exposed, each, delta=1e-12)
        self.assertAlmostEqual(step.seconds, 0.031 + each, delta=1e-12)
        self.assertEqual(step.bound, "inter bandwidth")


class Fit(unittest.TestCase):
    def curve(self, path, ranks, nodes, alpha, beta, noise, rng, backend="nccl", extra=None):
        rows = []
        for k in range(10, 31, 2):
            n = 1 << k
            p = ranks if nodes == 1 else nodes
            t = 2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta + (extra(n) if extra else 0.0)
            t *= 1 + rng.uniform(-noise, noise)
            rows.append({"bytes": n, "inplace": False, "time_us": t * 1e6, "wrong": 0})
            rows.append({"bytes": n, "inplace": True, "time_us": 1e9, "wrong": 0})  # left out
        with open(path, "w") as f:
            json.dump({"backend": backend, "world_size": ranks, "nodes": nodes, "results": rows}, f)

    def test_recovers_alpha_and_beta(self):
        rng = random.Random(SEED)
        with tempfile.TemporaryDirectory() as d:
            for noise, tol in ((0.0, 1e-9), (0.02, 0.08)):
                alpha, bw = rng.uniform(1e-6, 50e-6), rng.uniform(1e9, 400e9)
                ranks = rng.choice([2, 3, 4, 8])
                path = os.path.join(d, "c.json")
                self.curve(path, ranks, 1, alpha, 1 / bw, noise, rng)
                which, tier, _, _, _ = fit.fit(path)
                self.assertEqual(which, "intra")
                self.assertLess(abs(tier.alpha / alpha - 1), tol, f"alpha {tier.alpha} vs {alpha}, seed {SEED}")
                self.assertLess(abs(tier.bandwidth / bw - 1), tol, f"bandwidth {tier.bandwidth} vs {bw}")

    def test_hierarchical_curve_with_the_intra_tier_known(self):
        rng = random.Random(SEED + 1)
        alpha, bw = rng.uniform(5e-6, 100e-6), rng.uniform(0.1e9, 20e9)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "h.json")
            intra = lambda n: 2 * INTRA.alpha + n * INTRA.beta  # noqa: E731 (2 local ranks)
            self.curve(path, 4, 2, alpha, 1 / bw, 0.0, rng, "hierarchical", intra)
            which, tier, _, _, _ = fit.fit(path, intra=INTRA)
            self.assertEqual(which, "inter")
            self.assertAlmostEqual(tier.alpha / alpha, 1.0, delta=1e-6)
            self.assertAlmostEqual(tier.bandwidth / bw, 1.0, delta=1e-6)


class BadInput(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.good = {"format": "dtrain-step-profile", "version": 1, "model": "m", "device": "d", "batch_per_gpu": 8,
                     "step_ms": 0, "forward_ms": 1, "backward_ms": 2, "optimizer_ms": 0.1,
                     "gradient_bytes_per_element": 4, "gradients": [{"offset": 0, "elements": 10, "ready_ms": 1}]}

    def tearDown(self):
        self.dir.cleanup()

    def write(self, text):
        path = os.path.join(self.dir.name, "f.json")
        with open(path, "w") as f:
            f.write(text)
        return path

    def assertNames(self, loader, text, *words):
        path = self.write(text)
        with self.assertRaises(inputs.InputError) as e:
            loader(path)
        for w in (path,) + words:
            self.assertIn(w, str(e.exception))

    def test_profiles(self):
        self.assertNames(inputs.load_profile, json.dumps(self.good)[:40], "truncated")
        for key, value, word in (("version", 2, "version"), ("backward_ms", -1, "backward_ms"),
                                 ("batch_per_gpu", 0, "batch_per_gpu"), ("format", "x", "format")):
            bad = dict(self.good, **{key: value})
            self.assertNames(inputs.load_profile, json.dumps(bad), word)
        bad = dict(self.good, gradients=[{"offset": 0, "elements": 0, "ready_ms": 1}])
        self.assertNames(inputs.load_profile, json.dumps(bad), "gradients[0]", "elements")
        missing = os.path.join(self.dir.name, "missing.json")
        with self.assertRaises(inputs.InputError) as e:
            inputs.load_profile(missing)
        self.assertIn("missing.json: no such file", str(e.exception))

    def test_machines(self):
        m = {"format": "dtrain-machine", "version": 1, "gpus_per_node": 8,
             "intra": {"alpha_us": 1, "bandwidth_gbps": 100}, "inter": {"alpha_us": 1, "bandwidth_gbps": 10}}
        inputs.load_machine(self.write(json.dumps(m)))
        self.assertNames(inputs.load_machine, json.dumps(dict(m, gpus_per_node=-8)), "gpus_per_node")
        self.assertNames(inputs.load_machine, json.dumps(dict(m, inter={"alpha_us": 1, "bandwidth_gbps": 0})),
                         "inter", "bandwidth_gbps")
        self.assertNames(inputs.load_machine, json.dumps({k: v for k, v in m.items() if k != "intra"}), "intra")

    def test_layouts(self):
        prof = inputs.load_profile(self.write(json.dumps(self.good)))
        m = Machine(INTRA, INTER, local=8)
        for lay, word in ((pj.Layout(1, 16, "nccl", "fp32", 1 << 20, 8), "16 GPUs per node"),
                          (pj.Layout(0, 8, "nccl", "fp32", 1 << 20, 8), "node count 0"),
                          (pj.Layout(2, 8, "nccl", "fp32", 1 << 20, 0.5), "batch per GPU 0.5")):
            with self.assertRaises(inputs.InputError) as e:
                pj.project([prof], m, lay)
            self.assertIn(word, str(e.exception))


if __name__ == "__main__":
    unittest.main(verbosity=2)
