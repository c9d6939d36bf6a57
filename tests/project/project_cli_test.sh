#!/usr/bin/env bash
# dtrain-project end to end on the CPU: a tiny dtrain-train run writes a step profile
# (--profile-out), --fit turns committed all-reduce curves into a machine file, the projection
# prints its table over GPU counts (and its plot where Debian's python3-matplotlib is there), and
# bad inputs (a profile range past the run, a missing or truncated profile, an impossible layout)
# are errors naming what is wrong.
#   project_cli_test.sh SOURCE_DIR DTRAIN_TRAIN
set -u
src=$1
train=$2
py=/usr/bin/python3
tool=$src/bench/project/dtrain-project
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
args=(--model small-resnet --blocks_per_stage 1,1,1 --width 16 --image_size 8 --synthetic_samples 96
  --batch_per_rank 8 --epochs 1 --max-total-steps 8 --max-validation-batches 1 --log_every_steps 0
  --loader_threads 1 --bucket-mib 1 --device cpu)

"$train" "${args[@]}" --profile-out p8.json --profile-steps 3:6 > run.log 2>&1 || { cat run.log; fail "the run failed"; }
grep -q "profile: steps 3-6 to p8.json" run.log || fail "no log line naming the profile"
# The ranges tile the flat buffer in backward order, each ready inside backward.
"$py" - p8.json <<'PY' || fail "the profile does not check"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["format"] == "dtrain-step-profile" and p["version"] == 1 and p["steps_profiled"] == 4, p
assert p["tail_bucket_bytes"] == 1 << 20 and p["first_bucket_bytes"] == 0, p  # the engine's defaults
assert p["batch_per_gpu"] == 8 and p["forward_ms"] > 0 and p["backward_ms"] > 0 and p["optimizer_ms"] > 0, p
end = 0
for g in p["gradients"]:
    assert g["offset"] >= end and g["elements"] > 0, g
    assert 0 <= g["ready_ms"] <= p["backward_ms"] * 1.001 + 0.01, (g, p["backward_ms"])
    end = g["offset"] + g["elements"]
print(f"profile: {len(p['gradients'])} ranges, {end} elements, forward {p['forward_ms']} ms, "
      f"backward {p['backward_ms']} ms")
PY

res=$src/bench/results
"$py" "$tool" --fit "$res/2026-11-21_h200x2/allreduce_nccl_fp32_np2.json" --min-bytes 1048576 --update m.json \
  --gpus-per-node 8 --name "test machine" > fit_intra.log || { cat fit_intra.log; fail "--fit of the intra tier"; }
"$py" "$tool" --fit "$res/2026-11-21_cpu/allreduce_tcp_mpi-ring_rpn1_np4.json" --update m.json > fit_inter.log ||
  { cat fit_inter.log; fail "--fit of the inter tier"; }
grep -q "^alpha .* us, bandwidth .* GB/s" fit_inter.log || fail "--fit printed no alpha and bandwidth"
"$py" "$tool" --profile p8.json --machine m.json --batch-per-gpu 8 --gpus 1,8,64,4096 --json t.json > table.log ||
  { cat table.log; fail "the projection failed"; }
cat table.log
[ "$(grep -cE '^ +[0-9]+ +[0-9]+ x [0-9]+ ' table.log)" = 4 ] || fail "not one row per GPU count"
"$py" -c "import json; r = json.load(open('t.json')); assert [x['gpus'] for x in r] == [1, 8, 64, 4096], r" ||
  fail "the JSON table"
grep -q "buckets 25 MiB, tail 1 MiB, first 0 MiB" table.log || fail "the table names no bucket plan (the profile's)"
"$py" "$tool" --profile p8.json --machine m.json --batch-per-gpu 8 --gpus 8 --tail-bucket-mib 0.25 \
  --first-bucket-mib 0.5 > whatif.log || { cat whatif.log; fail "the what-if tail and first buckets"; }
grep -q "tail 0.25 MiB, first 0.5 MiB" whatif.log || fail "the what-if sizes are not the table's"
if "$py" -c "import matplotlib" 2> /dev/null; then
  "$py" "$tool" --profile p8.json --machine m.json --global-batch 64 --gpus 1,2,8 --plot t.png > /dev/null &&
    [ -s t.png ] || fail "no plot"
else
  echo "plot not drawn: $py has no matplotlib (Debian: python3-matplotlib)"
fi

# expect_error NAME TEXT COMMAND...: fails (rc != 0) with TEXT in its output.
expect_error() {
  local name=$1 text=$2
  shift 2
  "$@" > "$name.log" 2>&1 && fail "$name: succeeded"
  grep -qF -- "$text" "$name.log" || { cat "$name.log"; fail "$name: no '$text'"; }
  echo "$name: $(grep -F -- "$text" "$name.log" | head -1)"
}
expect_error range_past_run "--profile-steps 7:9: the run trains steps 1 to 8" "$train" "${args[@]}" \
  --profile-out x.json --profile-steps 7:9
head -c 200 p8.json > cut.json
expect_error truncated "cut.json: not valid JSON (truncated?)" "$py" "$tool" --profile cut.json --machine m.json \
  --batch-per-gpu 8
expect_error missing "nothere.json: no such file" "$py" "$tool" --profile nothere.json --machine m.json \
  --batch-per-gpu 8
expect_error layout "batch per GPU 0.5 at 128 GPUs" "$py" "$tool" --profile p8.json --machine m.json \
  --global-batch 64 --gpus 128
expect_error tail "--tail-bucket-mib -1: must not be negative" "$py" "$tool" --profile p8.json --machine m.json \
  --batch-per-gpu 8 --tail-bucket-mib -1
sed 's/"gpus_per_node": 8/"gpus_per_node": 0/' m.json > m0.json
expect_error machine "m0.json: field 'gpus_per_node' must be > 0" "$py" "$tool" --profile p8.json --machine m0.json \
  --batch-per-gpu 8
echo "PASS"
