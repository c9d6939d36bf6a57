#!/usr/bin/env bash
# dtrain-project against the simulated CPU cluster (cluster/sim): for each NODES (2, 4: one rank
# each) and link RATE (1gbit, 10gbit), fits the link's tier from a dtrain-bench-allreduce curve on
# the shaped links, measures dtrain-train's median step on a small ResNet over them, and predicts
# that step twice: (a) from a profile of the same job on one node right after (mpirun -np NODES
# without the cluster: the ranks share this VM's cores as on the simulated nodes, and their ring
# runs over TCP, shared-memory all-reduce off, so that its CPU work competes with compute as the
# cluster's does, only on an unshaped link), (b) from rank 0's own profile of
# the measured run (the compute as it ran, so only the communication is predicted). On a VM whose
# cores other jobs share, (b) is the fairer test of the communication model; the load average is
# recorded with each. Needs root; writes DIR (default bench/results/<date>_cpu/projection_sim/).
#   bench/run_sim_projection_check.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/results/$(date -u +%F)_cpu/projection_sim}
mkdir -p "$out"
bin=$PWD/build/bin
py=/usr/bin/python3
tool=("$py" "$PWD/bench/project/dtrain-project")
source cluster/sim/common.sh
state=$sim_state_dir
runs=$(mktemp -d)
trap 'cluster/sim/down >/dev/null 2>&1 || true; rm -rf "$runs"' EXIT
args=(--model small-resnet --blocks_per_stage 1,1,1 --width 64 --image_size 16 --synthetic_samples 4000
  --batch_per_rank 16 --epochs 1 --max-total-steps 40 --timing-warmup-steps 8 --max-validation-batches 1
  --log_every_steps 0 --loader_threads 1 --bucket-mib 4 --device cpu --backend mpi-ring --profile-steps 11:35)
: > "$out/summary.txt"
for nodes in 2 4; do
  for rate in 1gbit 10gbit; do
    tag=${nodes}x1_$rate
    cluster/sim/down > /dev/null
    cluster/sim/up "$nodes" --slots 1 --rate "$rate" > /dev/null
    echo "$tag: load $(cut -d' ' -f1-3 /proc/loadavg) before the cluster runs" >> "$out/summary.txt"
    (
      source "$state/env"
      "$bin/dtrain-run" -np "$nodes" --hostfile "$state/hostfile" -- "$bin/dtrain-bench-allreduce" -b 1M -e 16M \
        -f 2 -w 2 --iters 5 --backend mpi-ring --metrics-file "$out/allreduce_$tag.json" > "$out/allreduce_$tag.log" 2>&1
      "$bin/dtrain-run" -np "$nodes" --hostfile "$state/hostfile" -- "$bin/dtrain-train" "${args[@]}" \
        --run-dir "$runs/$tag" --profile-out "$out/measured_$tag.json" > "$out/train_$tag.log" 2>&1
    )
    cluster/sim/down > /dev/null
    echo "$tag: load $(cut -d' ' -f1-3 /proc/loadavg) before the profile run" >> "$out/summary.txt"
    mpirun --allow-run-as-root --oversubscribe --mca btl tcp,self -x DTRAIN_SHM_ALLREDUCE=0 -np "$nodes" "$bin/dtrain-train" "${args[@]}" \
      --run-dir "$runs/profile_$tag" --profile-out "$out/profile_$tag.json" > "$out/profile_$tag.log" 2>&1
    rm -f "$out/machine_$tag.json"
    "${tool[@]}" --fit "$out/allreduce_$tag.json" --tier intra --update "$out/machine_$tag.json" --gpus-per-node 1 \
      --name "cluster/sim $nodes nodes at $rate" > "$out/fit_$tag.txt"
    "${tool[@]}" --fit "$out/allreduce_$tag.json" --tier inter --update "$out/machine_$tag.json" >> "$out/fit_$tag.txt"
    measured=$("$py" -c "import json,sys; print(16e3 / json.load(open(sys.argv[1]))['step_ms'])" "$out/measured_$tag.json")
    cat > "$out/points_$tag.json" <<JSON
{"format": "dtrain-projection-points", "version": 1, "points": [
 {"name": "cluster/sim $nodes nodes x 1 rank, $rate, mpi-ring", "nodes": $nodes, "gpus_per_node": 1,
  "backend": "mpi-ring", "bucket_mib": 4, "batch_per_gpu": 16, "measured_img_per_sec_per_gpu": $measured}]}
JSON
    for how in profile measured; do
      "${tool[@]}" --profile "$out/${how}_$tag.json" --machine "$out/machine_$tag.json" \
        --check "$out/points_$tag.json" --json "$out/check_${how}_$tag.json" > "$out/check_${how}_$tag.txt" || true
      echo "$tag, compute from the $how run: $(grep '^  cluster' "$out/check_${how}_$tag.txt")" >> "$out/summary.txt"
    done
  done
done
cat "$out/summary.txt"
