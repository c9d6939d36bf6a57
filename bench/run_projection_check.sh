#!/usr/bin/env bash
# dtrain-project's calibration and validation in one command, from what bench/run_gpu_profile.sh
# wrote to DIR on a 4-GPU machine: fits the machine's tiers from the all-reduce curves
# (DIR/machine.json), collects the configurations measured in the same call (DIR/points.json),
# predicts each from the 1-GPU profiles and prints predicted against measured with the error; then
# the MLPerf v4.0 points on the assumed DGX H100 (bench/project/machines/dgx_h100_assumed.json)
# from the profiles at batch 400, 50 and 16 and the rest, and the projection table for 8 to 4,096
# H100s (DIR/projection_h100.txt, .json, .png). Needs only /usr/bin/python3 (matplotlib for the plot).
#   bench/run_projection_check.sh DIR
set -uo pipefail
dir=${1:?usage: bench/run_projection_check.sh DIR, the OUT of bench/run_gpu_profile.sh}
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
tool=("$py" "$here/project/dtrain-project")
profiles=()
for p in "$dir"/profile_b*.json; do
  [[ $p == *.train.json ]] || profiles+=(--profile "$p")
done
((${#profiles[@]})) || { echo "no $dir/profile_b*.json: run bench/run_gpu_profile.sh profiles first"; exit 2; }

echo "## tiers of the 4-GPU machine"
rm -f "$dir/machine.json"
gpu=$(sed -n '1s/^GPU 0: \([^(]*\) (.*/\1/p' "$dir/gpus.txt" 2> /dev/null)
"${tool[@]}" --fit "$dir/allreduce_nccl_np4.json" --min-bytes 1048576 --tier intra --update "$dir/machine.json" \
  --gpus-per-node 4 --name "4 x ${gpu:-GPU}, simulated nodes" || exit 2
# Simulated nodes talk through the host: each rank has its own staged path (no shared NIC).
"${tool[@]}" --fit "$dir/allreduce_mpi-ring_sim2x1.json" --min-bytes 1048576 --tier inter --no-shared-link \
  --update "$dir/machine.json" || exit 2

echo "## the configurations measured in the same call"
"$py" - "$dir" > "$dir/points.json" <<'PY' || exit 2
import json, os, sys
d = sys.argv[1]
def rows(name):
    with open(os.path.join(d, name)) as f:
        return json.load(f)
points = []
for r in rows("train_nccl.json"):
    points.append({"name": f"{r['world_size']} GPU(s), nccl", "nodes": 1, "gpus_per_node": r["world_size"],
                   "backend": "nccl", "batch_per_gpu": r["batch_per_gpu"],
                   "measured_img_per_sec_per_gpu": r["img_per_sec_per_gpu"], "source": "train_nccl.json"})
for wire in ("fp32", "bf16"):
    for r in rows(f"train_hierarchical_sim2x2_{wire}.json"):
        points.append({"name": f"2 sim. nodes x 2, hierarchical, {wire} wire", "nodes": 2, "gpus_per_node": 2,
                       "backend": "hierarchical", "wire": wire, "batch_per_gpu": r["batch_per_gpu"],
                       "measured_img_per_sec_per_gpu": r["img_per_sec_per_gpu"]})
for wire in ("fp32", "bf16"):
    for r in rows(f"train_mpi-ring_sim4x1_{wire}.json"):
        points.append({"name": f"4 sim. nodes x 1, mpi-ring, {wire} wire", "nodes": 4, "gpus_per_node": 1,
                       "backend": "mpi-ring", "wire": wire, "batch_per_gpu": r["batch_per_gpu"],
                       "measured_img_per_sec_per_gpu": r["img_per_sec_per_gpu"]})
json.dump({"format": "dtrain-projection-points", "version": 1, "what": "bench/run_gpu_profile.sh train",
           "points": points}, sys.stdout, indent=1)
PY
"${tool[@]}" "${profiles[@]}" --machine "$dir/machine.json" --check "$dir/points.json" --json "$dir/check_measured.json"
rc_measured=$?

echo "## MLPerf v4.0 on the assumed DGX H100"
"${tool[@]}" "${profiles[@]}" --machine "$here/project/machines/dgx_h100_assumed.json" \
  --check "$here/project/points/mlperf_v4.0_h100.json" --tolerance 25 --json "$dir/check_mlperf.json"
rc_mlperf=$?

echo "## projection: ResNet-50 bf16 on 8 to 4,096 H100 (DGX H100 assumed), MLPerf-like batches"
sched=8:400,16:200,32:100,64:50,128:50,256:32,512:32,1024:32,2048:16,2528:16,4096:16
for backend in nccl hierarchical; do
  "${tool[@]}" "${profiles[@]}" --machine "$here/project/machines/dgx_h100_assumed.json" --backend "$backend" \
    --batch-schedule "$sched" --json "$dir/projection_h100_$backend.json" --plot "$dir/projection_h100_$backend.png" |
    tee "$dir/projection_h100_$backend.txt"
done
echo "# measured points: rc $rc_measured, MLPerf points: rc $rc_mlperf (0: every point within its tolerance)"
