#!/bin/bash
# --timeline with --backend hierarchical across simulated nodes: 4 CPU ranks as 2 nodes of 2
# (DTRAIN_RANKS_PER_NODE=2) record steps 3 to 4 (8 gradient buckets of 1 MiB or less);
# every bucket all-reduce holds its intra-node reduce-scatter, cross-node ring and intra-node
# all-gather, once each, inside the bucket's span, in that order, with the bucket's bytes (the
# ring one shard's), as scripts/check_timeline.py --hierarchical 2 checks. Then
# scripts/timeline_phases.py summarizes that trace (every step, the three phases once per bucket,
# tail = last bucket end - backward end) and gives the exact numbers of a hand-made trace.
#   timeline_phases_test.sh MPIEXEC "MPI FLAGS" DTRAIN_TRAIN CHECK_TIMELINE_PY TIMELINE_PHASES_PY
set -u
mpiexec=$1
read -r -a mpi_flags <<<"$2"
train=$3
checker=$4
phases=$5
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

"$mpiexec" "${mpi_flags[@]}" -np 4 -x DTRAIN_RANKS_PER_NODE=2 "$train" --model small-resnet \
  --blocks_per_stage 1,1,1 --width 48 --image_size 8 --synthetic_samples 64 --batch_per_rank 4 --epochs 1 \
  --max-total-steps 4 --max-validation-batches 1 --log_every_steps 0 --loader_threads 1 --bucket-mib 1 \
  --device cpu --backend hierarchical --timeline out/trace.json --timeline-steps 3:4 > run.log 2>&1
rc=$?
cat run.log
[ "$rc" = 0 ] || fail "the run exited $rc"
grep -Eq "INFO  timeline of steps 3-4 \(4 rank\(s\), [0-9]+ spans\) written to out/trace.json" run.log ||
  fail "no log line naming the timeline file"
"$py" "$checker" out/trace.json --ranks 4 --steps 3:4 --device cpu --hierarchical 2 ||
  fail "the timeline's bucket phases do not check"

"$py" "$phases" out/trace.json || fail "timeline_phases.py failed on the run's trace"
"$py" "$phases" out/trace.json --json > summary.json || fail "timeline_phases.py --json failed"
"$py" - summary.json <<'EOF' || fail "the summary of the run's trace is wrong"
import json, sys
s = json.load(open(sys.argv[1]))
rows = s["steps"]
assert sorted((r["rank"], r["step"]) for r in rows) == [(r, t) for r in range(4) for t in (3, 4)], rows
names = {"intra-node reduce-scatter", "cross-node ring", "intra-node all-gather"}
for r in rows:
    assert r["buckets"] >= 2, r
    assert set(r["phases"]) == names, r["phases"]
    assert all(p["spans"] == r["buckets"] for p in r["phases"].values()), r
    assert abs(r["tail_ms"] - (r["last_bucket_end_ms"] - r["backward_end_ms"])) < 1e-9, r
    assert 0 < r["backward_end_ms"] < r["update_end_ms"] and r["last_bucket_end_ms"] <= r["update_end_ms"], r
    for p in r["phases"].values():
        assert 0 <= p["after_backward_ms"] <= p["total_ms"] + 1e-9, r
    # The phases run one after another inside the bucket spans.
    assert sum(p["total_ms"] for p in r["phases"].values()) <= r["all_reduce_total_ms"] + 1e-6, r
print("summary of", len(rows), "rank-steps checks")
EOF

# A hand-made trace (microseconds): forward 1000-2000, backward 2000-5000, SGD update 7000-7500; bucket 0 at 3000-4000
# (reduce-scatter 200, ring 600, all-gather 200), bucket 1 at 5000-7000 (500, 1000, 500) and a
# staged piece's D2H at 4500-5500 (half of it after backward).
"$py" - <<'EOF' > made.json
import json
def x(name, ts, end, **args):
    return {"name": name, "ph": "X", "pid": 0, "tid": 4, "ts": ts, "dur": end - ts, "args": dict(step=7, **args)}
ev = [x("forward", 1000, 2000), x("backward", 2000, 5000), x("SGD update", 7000, 7500),
      x("all-reduce bucket 0", 3000, 4000, bucket=0), x("intra-node reduce-scatter bucket 0", 3000, 3200, bucket=0),
      x("cross-node ring bucket 0", 3200, 3800, bucket=0), x("intra-node all-gather bucket 0", 3800, 4000, bucket=0),
      x("all-reduce bucket 1", 5000, 7000, bucket=1), x("intra-node reduce-scatter bucket 1", 5000, 5500, bucket=1),
      x("cross-node ring bucket 1", 5500, 6500, bucket=1), x("intra-node all-gather bucket 1", 6500, 7000, bucket=1),
      x("D2H bucket 1 piece 0", 4500, 5500, bucket=1, piece=0)]
print(json.dumps({"traceEvents": ev}))
EOF
"$py" "$phases" made.json --json > made_summary.json || fail "timeline_phases.py failed on the hand-made trace"
"$py" - made_summary.json <<'EOF' || fail "the summary of the hand-made trace is wrong"
import json, sys
r = json.load(open(sys.argv[1]))["steps"]
assert len(r) == 1, r
r = r[0]
want = {"backward_end_ms": 4.0, "last_bucket_end_ms": 6.0, "tail_ms": 2.0, "update_end_ms": 6.5,
        "all_reduce_total_ms": 3.0, "buckets": 2}
for k, v in want.items():
    assert abs(r[k] - v) < 1e-9, (k, r[k], v)
want = {"intra-node reduce-scatter": (0.7, 0.5), "cross-node ring": (1.6, 1.0), "intra-node all-gather": (0.7, 0.5),
        "D2H": (1.0, 0.5)}
assert set(r["phases"]) == set(want), r["phases"]
for name, (total, after) in want.items():
    p = r["phases"][name]
    assert abs(p["total_ms"] - total) < 1e-9 and abs(p["after_backward_ms"] - after) < 1e-9, (name, p)
print("hand-made trace: exact")
EOF
"$py" "$phases" run.log > /dev/null 2>&1 && fail "timeline_phases.py accepted a log file as a trace"
echo "PASS"
