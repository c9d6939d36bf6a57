#!/usr/bin/env bash
# The simulated cluster, 2 nodes x 2 ranks (cluster/sim): dtrain-info sees 2 nodes, the
# hierarchical all-reduce (real node layout) is exact across the TCP link and bytes really cross
# it, and a short Fashion-MNIST run reaches the expected accuracy.
# Usage: sim_two_nodes_test.sh BIN_DIR SOURCE_DIR (test binaries in BIN_DIR/tests). Exits 77 (ctest's skip) when this host cannot
# make network namespaces, saying why.
set -euo pipefail
bin=$1 src=$2
sim=$src/cluster/sim
export DTRAIN_SIM_OWNER=ctest

skip() { echo "SKIP: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "the simulated cluster needs root (network namespaces); running as $(id -un)"
command -v ip >/dev/null || skip "no 'ip' command (iproute2)"
ip netns add dtrain-sim-probe 2>/dev/null || skip "this host does not allow network namespaces (ip netns add failed)"
ip netns del dtrain-sim-probe

source "$sim/common.sh"
state=$sim_state_dir
if [[ -f $state/owner && $(cat "$state/owner") == ctest ]]; then "$sim/down"; fi  # left by a killed run
"$sim/up" 2 --slots 2
trap '"$sim/down" >/dev/null' EXIT
source "$state/env"
run=("$bin/dtrain-run" -np 4 --hostfile "$state/hostfile" --)

fail() { echo "FAIL: $*"; exit 1; }

echo "== dtrain-info"
info=$("${run[@]}" "$bin/dtrain-info" 2>&1) || fail "dtrain-info exited non-zero:"$'\n'"$info"
echo "$info"
grep -q "4 ranks on 2 nodes" <<<"$info" || fail "dtrain-info does not report 4 ranks on 2 nodes"
for r in "0  node1" "1  node1" "2  node2" "3  node2"; do
  grep -Eq "^ +${r%% *} +${r##* } " <<<"$info" || fail "rank ${r%% *} is not on ${r##* }"
done

echo "== hierarchical all-reduce across the link"
bytes_into_node2() { cat "/sys/class/net/$(sim_veth node2)/statistics/tx_bytes"; }
before=$(bytes_into_node2)
# The matrix cases (3 dtypes x in/out of place x 3 collectives) and the behaviour tests: every one
# the filter lists must run and pass (counted, so that a new test cannot make this fail or hide).
filter='*/hierarchical_f*:*/hierarchical_bf*:*/hierarchical'
expected=$("$bin/tests/dtrain-comm-mpi-tests" --gtest_list_tests --gtest_filter="$filter" | grep -c '^  ')
[ "$expected" -ge 21 ] || fail "only $expected hierarchical collective tests listed"
out=$(DTRAIN_TEST_EXPECT_NODES=2 "${run[@]}" "$bin/tests/dtrain-comm-mpi-tests" --gtest_color=no \
  --gtest_filter="$filter" 2>&1) || fail "collective tests failed:"$'\n'"$out"
echo "$out" | grep -E "^\[ +(OK|FAILED|PASSED) "
grep -q "PASSED .* $expected tests" <<<"$out" || fail "not all $expected hierarchical collective tests ran and passed"
crossed=$(($(bytes_into_node2) - before))
echo "bytes sent into node2 over its link: $crossed"
((crossed > 10000000)) || fail "only $crossed bytes crossed into node2: the ranks did not talk across the simulated link"

echo "== Fashion-MNIST, 2 short epochs"
out=$("${run[@]}" "$bin/dtrain-train" --config "$src/configs/fashion_mnist_resnet.pbtxt" --epochs 2 \
  --max_steps_per_epoch 100 --max_validation_batches 40 --log_every_steps 50 --backend hierarchical 2>&1) || fail "dtrain-train failed:"$'\n'"$out"
echo "$out"
grep -Eq "communicator: hierarchical \(requested: [0-9]+ ranks on 2 nodes" <<<"$out" || fail "training did not pick the hierarchical communicator over 2 nodes"
# 200 steps at global batch 128 reach 77% on this run (session 3); 70% leaves room for the
# different summation order of other builds and still fails on a broken gradient exchange.
grep -Eq "epoch 1: .*top-1 (7[0-9]|[89][0-9])\." <<<"$out" || fail "epoch 1 top-1 is below 70%"
echo "PASS"
