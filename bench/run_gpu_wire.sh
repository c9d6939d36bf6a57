#!/usr/bin/env bash
# The cross-node levers (hierarchical all-reduce, bf16 wire, staging-stream signals) on a 2-GPU
# machine, the GPUs as 2 simulated nodes
# (DTRAIN_RANKS_PER_NODE=1, staged through the host), every row in one call:
#   - dtrain-bench-train ResNet-50 bf16 b256, hierarchical: 1 GPU, then 2 GPUs with the fp32 and the
#     bf16 cross-node wire, each with the staging streams signalled by stream memory operations
#     (the default) and by one-thread kernels (DTRAIN_STREAM_FLAG_KERNELS=1); nccl for reference;
#   - dtrain-bench-allreduce, 64 MiB fp32 device buffers: staged mpi-ring (both signals),
#     hierarchical, nccl, and a host MPI_Allreduce of the same bytes;
#   - dtrain-train on synthetic data, hierarchical, fp32 and bf16 wire, against 1 GPU.
# Run from the repository root with the binaries in $BIN; logs and JSON under $OUT; summary.txt.
#   FLAGS="0 1" adds the kernel-signalled runs to `train`.
#   - (trace) the same hierarchical runs with DTRAIN_STAGING_TRACE; (segments) the host ring's
#     segment size on the staged all-reduce.
#   - (lanes) DTRAIN_RING_LANES 1, 2, 4 (the default), 8 on the staged all-reduce; 1 and 8 in training.
#   BIN=build/bin OUT=/tmp/out bench/run_gpu_wire.sh [train|allreduce|trainer|trace|segments|lanes]...
#   (default: train allreduce trainer)
set -uo pipefail
BIN=${BIN:-build/bin}
OUT=${OUT:-/tmp/dtrain_wire}
PARTS=${*:-train allreduce trainer}
mkdir -p "$OUT"
SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 DTRAIN_RANKS_PER_NODE=1 DTRAIN_MPI_DEVICE_POINTERS=stage DTRAIN_STREAM_FLAG_KERNELS=0
MPI=(mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x DTRAIN_RANKS_PER_NODE
     -x DTRAIN_MPI_DEVICE_POINTERS -x DTRAIN_STREAM_FLAG_KERNELS)
step() {  # step NAME LIMIT_S COMMAND...
  local name=$1 limit=$2 start=$SECONDS
  shift 2
  timeout -k 10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  printf "%-40s rc %-4s %4d s\n" "$name" "$?" $((SECONDS - start)) >> "$OUT/steps.txt"
}
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
BT=(--precision bf16 --batch-per-rank 256 --timing-warmup-steps 10 --steps 30)
for part in $PARTS; do case $part in
train)
  step bt_1gpu 200 "${MPI[@]}" -np 1 "$BIN/dtrain-bench-train" "${BT[@]}" --world-sizes 1 --metrics-file "$OUT/bt_1gpu.json"
  for flag in ${FLAGS:-0}; do for wire in fp32 bf16; do
    DTRAIN_STREAM_FLAG_KERNELS=$flag step "bt_hier_${wire}_kernels$flag" 200 "${MPI[@]}" -np 2 "$BIN/dtrain-bench-train" \
      "${BT[@]}" --backend hierarchical --gradient-wire-dtype $wire --world-sizes 2 --metrics-file "$OUT/bt_hier_${wire}_kernels$flag.json"
  done; done
  step bt_nccl 200 "${MPI[@]}" -np 2 "$BIN/dtrain-bench-train" "${BT[@]}" --backend nccl --world-sizes 2 --metrics-file "$OUT/bt_nccl.json" ;;
trace)  # where a staged step's time goes: DTRAIN_STAGING_TRACE, fp32 and bf16 wire
  for wire in fp32 bf16; do
    step "trace_$wire" 200 "${MPI[@]}" -np 2 -x DTRAIN_STAGING_TRACE=$OUT/trace_$wire "$BIN/dtrain-bench-train" \
      "${BT[@]}" --backend hierarchical --gradient-wire-dtype $wire --world-sizes 2 --metrics-file "$OUT/trace_$wire.json"
  done ;;
lanes)  # rings side by side (DTRAIN_RING_LANES) on the staged all-reduce and the hierarchical step
  for lanes in 1 2 4 8; do
    step "ar_mpi-ring_lanes$lanes" 120 "${MPI[@]}" -np 2 -x DTRAIN_RING_LANES=$lanes "$BIN/dtrain-bench-allreduce" \
      -b 64M -e 64M -w 5 --iters 20 --backend mpi-ring --metrics-file "$OUT/ar_mpi-ring_lanes$lanes.json"
  done
  for lanes in 1 8; do for wire in fp32 bf16; do
    step "bt_hier_${wire}_lanes$lanes" 200 "${MPI[@]}" -np 2 -x DTRAIN_RING_LANES=$lanes "$BIN/dtrain-bench-train" \
      "${BT[@]}" --backend hierarchical --gradient-wire-dtype $wire --world-sizes 2 --metrics-file "$OUT/bt_hier_${wire}_lanes$lanes.json"
  done; done ;;
segments)  # the host ring's segment size on the staged 64 MiB all-reduce
  for seg in 65536 1048576 4194304; do
    step "ar_mpi-ring_segment$seg" 120 "${MPI[@]}" -np 2 -x DTRAIN_RING_SEGMENT_BYTES=$seg "$BIN/dtrain-bench-allreduce" \
      -b 64M -e 64M -w 5 --iters 20 --backend mpi-ring --metrics-file "$OUT/ar_mpi-ring_segment$seg.json"
  done ;;
allreduce)
  A=(-b 64M -e 64M -w 5 --iters 20)
  for flag in 0 1; do
    DTRAIN_STREAM_FLAG_KERNELS=$flag step "ar_mpi-ring_kernels$flag" 120 "${MPI[@]}" -np 2 "$BIN/dtrain-bench-allreduce" \
      "${A[@]}" --backend mpi-ring --metrics-file "$OUT/ar_mpi-ring_kernels$flag.json"
  done
  for backend in hierarchical nccl raw-mpi; do
    step "ar_$backend" 120 "${MPI[@]}" -np 2 "$BIN/dtrain-bench-allreduce" "${A[@]}" --backend "$backend" --metrics-file "$OUT/ar_$backend.json"
  done ;;
trainer)
  TR=(--dataset synthetic --batch_per_rank 256 --epochs 1 --log_every_steps 20 --max_validation_batches 2)
  step tr_1gpu 200 "${MPI[@]}" -np 1 "$BIN/dtrain-train" "${TR[@]}" --synthetic_samples 25600
  for wire in fp32 bf16; do
    step "tr_hier_$wire" 200 "${MPI[@]}" -np 2 "$BIN/dtrain-train" "${TR[@]}" --synthetic_samples 51200 \
      --backend hierarchical --gradient_wire_dtype $wire
  done ;;
esac; done
python3 - "$OUT" > "$OUT/summary.txt" <<'PYEOF'
import glob, json, os, re, sys
out = sys.argv[1]
print("#", open(os.path.join(out, "gpus.txt")).read().strip().replace("\n", "; "))
print(open(os.path.join(out, "steps.txt")).read().rstrip())
one = None
for path in sorted(glob.glob(os.path.join(out, "bt_*.json"))):
    for r in json.load(open(path)):
        if r["world_size"] == 1: one = r["img_per_sec_per_gpu"]
for path in sorted(glob.glob(os.path.join(out, "bt_*.json"))):
    for r in json.load(open(path)):
        eff = r["img_per_sec_per_gpu"] / one if one and r["world_size"] > 1 else None
        print("bench-train %-28s %d GPU(s): %8.1f img/s per GPU, step %.2f ms%s" % (os.path.basename(path)[3:-5],
              r["world_size"], r["img_per_sec_per_gpu"], r["step_ms_median"], ", %.1f%% of 1 GPU" % (100 * eff) if eff else ""))
for path in sorted(glob.glob(os.path.join(out, "ar_*.json"))):
    j = json.load(open(path))
    best = min((r for r in j["results"] if r["bytes"] == 64 << 20), key=lambda r: r["time_us"], default=None)
    if best: print("allreduce 64 MiB %-22s %8.2f ms %6.2f GB/s busbw, %d wrong" % (os.path.basename(path)[3:-5],
                   best["time_us"] / 1e3, best["busbw_gbps"], best["wrong"]))
for path in sorted(glob.glob(os.path.join(out, "tr_*.log"))):
    text = open(path).read()
    rates = re.findall(r"epoch 0.*", text)
    print("dtrain-train %-12s %s" % (os.path.basename(path)[3:-4], rates[-1] if rates else "no epoch line"))
PYEOF
cat "$OUT/summary.txt"
