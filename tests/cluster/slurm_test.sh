#!/usr/bin/env bash
# Real Slurm on this machine: starts munged, slurmctld and slurmd for a one-node cluster
# (localhost, 2 CPUs) in a private directory, then submits with sbatch:
#   1. dtrain-run -np 2 dtrain-train, a short Fashion-MNIST run: the job must be COMPLETED and its
#      output must hold the accuracy line;
#   2. dtrain-run -np 2 with rank 1 exiting 3: the job must end at once as FAILED with exit code 3
#      and output naming rank 1;
#   3. cluster/slurm/resnet50_imagenet.sbatch's launch inside the allocation (DTRAIN_DRY_RUN=1).
# Stops the daemons by their pids at the end, whatever happened.
# Usage: slurm_test.sh BIN_DIR SOURCE_DIR. Exits 77 (ctest's skip), saying why, only when the
# daemons are not installed or cannot start on this host.
set -euo pipefail
bin=$1 src=$2

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
[[ $(id -u) -eq 0 ]] || skip "a private Slurm needs root (slurmd runs jobs as their user); running as $(id -un)"
for daemon in munged slurmctld slurmd sbatch scontrol; do
  command -v $daemon >/dev/null || skip "$daemon is not installed (Debian packages munge, slurmctld, slurmd, slurm-client; scripts/install_deps.sh installs them)"
done

work=$(mktemp -d /tmp/dtrain-slurm.XXXXXX)
chmod 755 "$work"
pids=()
stop_daemons() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
}
show_logs() { for f in "$work"/*.log; do echo "--- $f"; tail -20 "$f"; done; }
trap 'status=$?; stop_daemons; ((status == 0 || status == 77)) || show_logs; rm -rf "$work"' EXIT

# Ports: free ones, so a Slurm already on this host (or a second test run) is not disturbed.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])'; }
ctld_port=$(free_port) slurmd_port=$(free_port)
node=$(hostname -s)

# munge: a private key and socket.
dd if=/dev/urandom of="$work/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge.key"
mkdir -m 700 "$work/munge"
munged --foreground --force --key-file="$work/munge.key" --socket="$work/munge/socket" \
  --pid-file="$work/munge/pid" --seed-file="$work/munge/seed" --log-file="$work/munged.log" 2>>"$work/stderr.log" &
pids+=($!)

mkdir -p "$work/ctld" "$work/spool"
export SLURM_CONF=$work/slurm.conf
cat > "$SLURM_CONF" <<CONF
ClusterName=dtraintest
SlurmctldHost=$node
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge/socket
CredType=cred/munge
StateSaveLocation=$work/ctld
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=600
NodeName=$node CPUs=2 State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF

for _ in $(seq 50); do [[ -S $work/munge/socket ]] && break; sleep 0.1; done
[[ -S $work/munge/socket ]] || skip "munged did not start on this host: $(tail -3 "$work/munged.log" 2>/dev/null)"
slurmctld -D -i 2>>"$work/stderr.log" &
pids+=($!)
slurmd -D 2>>"$work/stderr.log" &
pids+=($!)

# Ready when the controller answers and the node is idle (slurmd has registered).
ready=false
for _ in $(seq 100); do
  if state=$(sinfo -h -n "$node" -o %t 2>/dev/null) && [[ $state == idle ]]; then ready=true; break; fi
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null || skip "a Slurm daemon (pid $pid) exited at start on this host: $(tail -5 "$work"/slurm*.log 2>/dev/null | tr '\n' ' ')"; done
  sleep 0.3
done
$ready || skip "the Slurm node did not become idle in 30 s (state '${state:-none}'): $(tail -5 "$work/slurmd.log" | tr '\n' ' ')"
echo "slurm up: $(sinfo -h -o '%P %D %t %c') ($(sinfo --version)); srun MPI plugins: $(srun --mpi=list 2>&1 | tr '\n' ' ')"

# Submits SCRIPT (text) as a 2-task job and waits for it to end; prints "STATE EXITCODE".
submit_and_wait() {
  local name=$1 script=$2 id state="" code=""
  printf '%s\n' "$script" > "$work/$name.sbatch"
  id=$(sbatch --parsable --job-name="$name" --ntasks=2 --output="$work/$name-%j.out" "$work/$name.sbatch") ||
    fail "sbatch refused job $name"
  for _ in $(seq 1200); do
    state=$(scontrol show job "$id" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    case $state in PENDING|CONFIGURING|RUNNING|COMPLETING|"") sleep 0.5 ;; *) break ;; esac
  done
  code=$(scontrol show job "$id" | grep -o ' ExitCode=[0-9:]*' | cut -d= -f2)
  echo "--- job $name ($id): $state, exit code $code" >&2
  cat "$work/$name-$id.out" >&2
  cp "$work/$name-$id.out" "$work/$name.out"
  echo "$state $code"
}

echo "== 1. sbatch: dtrain-run -np 2 dtrain-train (Fashion-MNIST, 60 steps)"
result=$(submit_and_wait train "#!/bin/bash
exec $bin/dtrain-run -np 2 -- $bin/dtrain-train --config $src/configs/fashion_mnist_resnet.pbtxt --epochs 1 \
  --max_steps_per_epoch 60 --max_validation_batches 20 --log_every_steps 20 --backend mpi-ring")
[[ $result == "COMPLETED 0:0" ]] || fail "training job ended '$result', expected 'COMPLETED 0:0'"
grep -Eq "epoch 0: .*validation loss [0-9.]+ top-1 [0-9.]+%" "$work/train.out" || fail "no accuracy line in the job's output"
grep -q "2 ranks\|world size 2" "$work/train.out" || fail "the job did not train on 2 ranks"

echo "== 2. sbatch: rank 1 exits 3"
start=$SECONDS
result=$(submit_and_wait abort "#!/bin/bash
exec $bin/dtrain-run -np 2 -- $src/tests/support/fail_on_rank.sh 1 3")
elapsed=$((SECONDS - start))
[[ $result == "FAILED 3:0" ]] || fail "failing job ended '$result', expected 'FAILED 3:0'"
grep -Eq "rank 1|task 1" "$work/abort.out" || fail "the job's output does not name rank 1"
((elapsed < 30)) || fail "the job took $elapsed s to end after rank 1 failed (the other rank sleeps 60 s)"
echo "ended in ${elapsed} s"

echo "== 3. cluster/slurm/resnet50_imagenet.sbatch inside an allocation (dry run)"
result=$(submit_and_wait imagenet_dry_run "#!/bin/bash
DTRAIN_DRY_RUN=1 DTRAIN_DATA_DIR=/datasets/imagenet DTRAIN_BIN=$bin DTRAIN_CONFIG=$src/configs/resnet50_imagenet.pbtxt \
  DTRAIN_RUN_DIR=$work/run exec bash $src/cluster/slurm/resnet50_imagenet.sbatch")
[[ $result == "COMPLETED 0:0" ]] || fail "dry-run job ended '$result'"
grep -Eq "^(srun --mpi=pmix --ntasks 2 --kill-on-bad-exit=1|mpirun -np 2 ).*dtrain-train --config .*resnet50_imagenet.pbtxt --data_dir /datasets/imagenet --checkpoint_dir $work/run" \
  "$work/imagenet_dry_run.out" || fail "the sbatch script did not launch dtrain-train over the allocation's 2 tasks"
echo "PASS"
