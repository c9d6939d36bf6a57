# A private one-node Slurm on this machine (localhost, 2 CPUs): munged, slurmctld and slurmd in a
# directory of their own, on free ports, so a Slurm already on this host (or a second run of a test)
# is not disturbed. Sourced by tests/cluster/slurm_test.sh and bench/reliability/preemption_campaign.sh:
#
#   source tests/cluster/slurm_cluster.sh
#   reason=$(slurm_cluster_unavailable) && skip "$reason"    # not root, or a daemon not installed
#   slurm_cluster_start "$work" || skip "$slurm_cluster_error"  # exports SLURM_CONF
#   trap 'slurm_cluster_stop' EXIT                            # stops the daemons by their pids
#   id=$(slurm_submit NAME SCRIPT_TEXT [sbatch options]); slurm_wait_job "$id" 120
#
# The caller owns WORK (the daemons' keys, spool, state and logs go there; it must be readable by
# jobs, mode 755). Jobs can be requeued (--requeue; MinJobAge=600 keeps a finished job visible to
# scontrol for 10 minutes).

slurm_cluster_pids=()
slurm_cluster_error=""
slurm_cluster_work=""

# Prints why a private Slurm cannot run here and returns 0; returns 1 (prints nothing) when it can.
slurm_cluster_unavailable() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "a private Slurm needs root (slurmd runs jobs as their user); running as $(id -un)"
    return 0
  fi
  local daemon
  for daemon in munged slurmctld slurmd sbatch scontrol scancel squeue; do
    if ! command -v $daemon >/dev/null; then
      echo "$daemon is not installed (Debian packages munge, slurmctld, slurmd, slurm-client; scripts/install_deps.sh installs them)"
      return 0
    fi
  done
  return 1
}

# Starts the daemons with WORK as their directory and waits (polling, up to 60 s) until the node
# is idle. Returns 1 with slurm_cluster_error set when they cannot start on this host.
slurm_cluster_start() {
  local work=$1 ctld_port slurmd_port node state="" ready=false pid
  slurm_cluster_work=$work
  free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])'; }
  ctld_port=$(free_port) slurmd_port=$(free_port)
  node=$(hostname -s)
  slurm_cluster_node=$node

  # munge: a private key and socket.
  dd if=/dev/urandom of="$work/munge.key" bs=1024 count=1 status=none
  chmod 400 "$work/munge.key"
  mkdir -m 700 "$work/munge"
  munged --foreground --force --key-file="$work/munge.key" --socket="$work/munge/socket" \
    --pid-file="$work/munge/pid" --seed-file="$work/munge/seed" --log-file="$work/munged.log" 2>>"$work/stderr.log" &
  slurm_cluster_pids+=($!)

  mkdir -p "$work/ctld" "$work/spool" "$work/tmpfs"
  # Two private clusters on one host must not number their jobs alike: Open MPI names its shared
  # memory segments after the PMIx namespace srun gives it (slurm.pmix.<job>.<step>), and two jobs
  # 1 of two clusters at once attached to each other's and crashed (SIGSEGV in
  # mca_btl_vader_poll_handle_frag, both jobs). So jobs are numbered from a random first id, and
  # TmpFS, where srun's PMIx plugin makes its directories (spmix_appdir_<uid>_<job>.<step>), is
  # this cluster's own. cred_expire
  # is also how long a requeued job waits before it can start again (default 120 s); a scheduling
  # pass every second starts it then (default 60 s). A job of partition urgent preempts one of
  # partition test: SIGTERM to its tasks, then 60 s (GraceTime) before it is killed and requeued.
  export SLURM_CONF=$work/slurm.conf
  slurm_cluster_first_job=$((RANDOM * 1000 + RANDOM % 1000 + 1000))
  cat > "$SLURM_CONF" <<CONF
ClusterName=dtraintest
FirstJobId=$slurm_cluster_first_job
SlurmctldHost=$node
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge/socket,cred_expire=5
CredType=cred/munge
StateSaveLocation=$work/ctld
SlurmdSpoolDir=$work/spool
TmpFS=$work/tmpfs
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=600
JobRequeue=1
NodeName=$node CPUs=2 State=UNKNOWN
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=1 PreemptMode=REQUEUE GraceTime=60
PartitionName=urgent Nodes=$node MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=2 PreemptMode=OFF
CONF

  for _ in $(seq 100); do [[ -S $work/munge/socket ]] && break; sleep 0.1; done
  if [[ ! -S $work/munge/socket ]]; then
    slurm_cluster_error="munged did not start on this host: $(tail -3 "$work/munged.log" 2>/dev/null)"
    return 1
  fi
  slurmctld -D -i 2>>"$work/stderr.log" &
  slurm_cluster_pids+=($!)
  slurmd -D 2>>"$work/stderr.log" &
  slurm_cluster_pids+=($!)

  # Ready when the controller answers and the node is idle (slurmd has registered).
  for _ in $(seq 200); do
    if state=$(sinfo -h -n "$node" -o %t 2>/dev/null) && [[ $state == idle ]]; then ready=true; break; fi
    for pid in "${slurm_cluster_pids[@]}"; do
      if ! kill -0 "$pid" 2>/dev/null; then
        slurm_cluster_error="a Slurm daemon (pid $pid) exited at start on this host: $(tail -5 "$work"/slurm*.log 2>/dev/null | tr '\n' ' ')"
        return 1
      fi
    done
    sleep 0.3
  done
  if ! $ready; then
    slurm_cluster_error="the Slurm node did not become idle in 60 s (state '${state:-none}'): $(tail -5 "$work/slurmd.log" | tr '\n' ' ')"
    return 1
  fi
}

# Pids of what this cluster's slurmd started that is still there: slurmstepd and the jobs'
# processes, which outlive slurmd. Each has this cluster's SLURM_CONF (a private path) in its
# environment; the jobs' processes also SLURM_JOB_ID.
slurm_cluster_job_pids() {
  local f p
  [[ -n $slurm_cluster_work ]] || return 0
  for f in $(grep -lzx "SLURM_CONF=$slurm_cluster_work/slurm.conf" /proc/[0-9]*/environ 2>/dev/null); do
    p=${f#/proc/}
    p=${p%/environ}
    if grep -qz "^SLURM_JOB_ID=" "$f" 2>/dev/null || [[ $(cat "/proc/$p/comm" 2>/dev/null) == slurmstepd ]]; then echo "$p"; fi
  done
}

# Ends the jobs still there (scancel, then up to 30 s for their processes to go), stops the
# daemons this shell started, by their pids (TERM, up to 5 s, then KILL), and kills by pid any
# process of a job that is left.
slurm_cluster_stop() {
  local pid ids left
  if [[ -n ${slurm_cluster_pids[1]:-} ]] && kill -0 "${slurm_cluster_pids[1]}" 2>/dev/null; then
    ids=$(timeout 10 squeue -h -o %i 2>/dev/null || true)
    if [[ -n $ids ]]; then timeout 10 scancel $ids 2>/dev/null || true; fi
    for _ in $(seq 100); do
      [[ -z $(slurm_cluster_job_pids) ]] && break
      sleep 0.3
    done
  fi
  for pid in "${slurm_cluster_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${slurm_cluster_pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  slurm_cluster_pids=()
  left=$(slurm_cluster_job_pids)
  if [[ -n $left ]]; then
    echo "slurm_cluster_stop: killing what the jobs left running: $(echo $left)" >&2
    kill -9 $left 2>/dev/null || true
  fi
}

slurm_cluster_show_logs() {
  local f
  for f in "$slurm_cluster_work"/*.log; do echo "--- $f"; tail -20 "$f"; done
}

# A field of `scontrol show job ID` (JobState, ExitCode, Restarts, ...); empty once the job is gone.
slurm_job_field() {
  { scontrol show job "$1" 2>/dev/null || true; } | { grep -o "\(^\| \)$2=[^ ]*" || true; } | head -1 | cut -d= -f2
}

# Writes SCRIPT (text) to WORK/NAME.sbatch and submits it as a 2-task job with its output in
# WORK/NAME-<id>.out, plus any further sbatch OPTIONS; prints the job id.
slurm_submit() {
  local name=$1 script=$2
  shift 2
  printf '%s\n' "$script" > "$slurm_cluster_work/$name.sbatch"
  sbatch --parsable --job-name="$name" --ntasks=2 --output="$slurm_cluster_work/$name-%j.out" "$@" \
    "$slurm_cluster_work/$name.sbatch"
}

# Whether STATE is one a job does not leave by itself (it ended, or is held). Passing states,
# among them SIGNALING (a preemption's signal outgoing), COMPLETING and REQUEUED, are not.
slurm_state_is_final() {
  case $1 in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|PREEMPTED|BOOT_FAIL|DEADLINE|OUT_OF_MEMORY|REVOKED|SPECIAL_EXIT|REQUEUE_HOLD) return 0 ;;
    *) return 1 ;;
  esac
}

# Waits (polling every 0.3 s) up to SECONDS for job ID to end (slurm_state_is_final). Prints the
# state; returns 1 on the time limit.
slurm_wait_job() {
  local id=$1 limit=$2 state="" start=$SECONDS
  while ((SECONDS - start < limit)); do
    state=$(slurm_job_field "$id" JobState)
    if slurm_state_is_final "$state"; then echo "$state"; return 0; fi
    sleep 0.3
  done
  echo "${state:-gone}"
  return 1
}

# Polls job ID (every 0.3 s, up to SECONDS) until it ends; prints the states it was seen in, each
# change once ("RUNNING PENDING RUNNING COMPLETED" for a job requeued once). Returns 1 on the limit.
slurm_watch_job() {
  local id=$1 limit=$2 state seen="" last="" start=$SECONDS
  while ((SECONDS - start < limit)); do
    state=$(slurm_job_field "$id" JobState)
    if [[ -n $state && $state != "$last" ]]; then seen+="${seen:+ }$state"; last=$state; fi
    if slurm_state_is_final "$state"; then echo "$seen"; return 0; fi
    sleep 0.3
  done
  echo "$seen"
  return 1
}

# Waits (polling every 0.2 s, up to SECONDS) until FILE, job ID's output, holds a line matching the
# extended regular expression PATTERN. Returns 1 when the job ended first or on the limit.
slurm_wait_output() {
  local id=$1 file=$2 pattern=$3 limit=$4 start=$SECONDS
  while ((SECONDS - start < limit)); do
    grep -Eq "$pattern" "$file" 2>/dev/null && return 0
    slurm_state_is_final "$(slurm_job_field "$id" JobState)" && break
    sleep 0.2
  done
  grep -Eq "$pattern" "$file" 2>/dev/null
}

# Preempts whatever runs in partition test: a job of partition urgent (PriorityTier 2) needing both
# CPUs. Slurm sends the preempted job's tasks SIGCONT and SIGTERM at once and, with GraceTime=60,
# gives it 60 s to end before it is killed (PreemptMode=REQUEUE); prints the urgent job's id.
slurm_preempt_with_urgent_job() {
  slurm_submit urgent "#!/bin/bash
sleep 1" --partition=urgent
}

# --- dtrain preemption runs under this Slurm (slurm_test.sh job 4, preemption_campaign.sh) ---

# A small ResNet on 32x32 synthetic images, 2 ranks x batch 8, 192 steps an epoch (~25 ms a step
# on a 2-core VM: epoch 0 lasts about 5 s, 15 s under load), 2 epochs, ending at global step 384.
dtrain_preemption_steps_per_epoch=192
dtrain_preemption_final_step=384
dtrain_preemption_config() {
  cat <<'CFG'
model: "small-resnet"
blocks_per_stage: 1
blocks_per_stage: 1
width: 8
dataset: "synthetic"
image_size: 32
synthetic_samples: 3072
batch_per_rank: 8
epochs: 2
loader_threads: 1
max_validation_batches: 2
log_every_steps: 8
CFG
}

# Submits cluster/slurm/resnet50_imagenet.sbatch (the user-facing script, unchanged) as job NAME
# with CONFIG, checkpoints in RUN_DIR and any further sbatch OPTIONS; prints the job id. The data
# directory is a placeholder: synthetic data reads none.
dtrain_submit_sbatch_script() {
  local name=$1 run_dir=$2 config=$3 src=$4 bin=$5
  shift 5
  slurm_submit "$name" "#!/bin/bash
DTRAIN_DATA_DIR=$slurm_cluster_work/unused-by-synthetic-data DTRAIN_BIN=$bin DTRAIN_CONFIG=$config \\
  DTRAIN_RUN_DIR=$run_dir exec bash $src/cluster/slurm/resnet50_imagenet.sbatch" "$@"
}

# The tensors of a checkpoint: everything after "DTRAINC2", the 8-byte header length, the 4-byte
# header CRC and the header (train/proto/checkpoint.proto), as tests/train/preemption_test.sh.
dtrain_checkpoint_tensors() { local n; n=$(od -An -t u8 -j 8 -N 8 "$1" | tr -d ' '); tail -c +$((21 + n)) "$1"; }

# The checkpoint of RUN_DIR with the highest global step (ckpt-STEP-RUNID.dtrain); nothing if none.
dtrain_final_checkpoint() {
  local f
  f=$(cd "$1" 2>/dev/null && { ls ckpt-*.dtrain 2>/dev/null || true; } | sort -t- -k2,2n | tail -1)
  if [[ -n $f ]]; then echo "$1/$f"; fi
}

# Reads what job ID (output OUT, checkpoints in RUN_DIR) did after a stop signal, into variables:
#   run_stop_signal run_stop_step run_stop_epoch  the signal rank 0 stopped on (other-rank: it had
#                       none yet when the ranks agreed to stop on another's), at which global step
#                       and in which epoch ("" when it did not stop)
#   run_first_exit      the first attempt's launcher exit status (srun's "Exited with exit code N")
#   run_requeued        yes when the sbatch script requeued the job (it does so on status 75 only)
#   run_attempts        the attempts the script logged; run_restarts: scontrol's Restarts
#   run_resumed_step    the global step the second attempt resumed from ("" when none)
#   run_state run_exit  scontrol's JobState and ExitCode now
#   run_final           the final checkpoint's file name
#   run_identical       yes when its tensors equal REFERENCE_CHECKPOINT's byte for byte
dtrain_read_preempted_run() {
  local id=$1 out=$2 run_dir=$3 reference=$4 line final
  line=$(grep -Eo "stopped by a stop signal \((SIG[A-Z0-9]+|on another rank)\) at step [0-9]+ \(epoch [0-9]+" "$out" |
    head -1 || true)
  run_stop_signal=$(sed -E 's/.*\((SIG[A-Z0-9]+|on another rank)\).*/\1/; s/on another rank/other-rank/' <<<"$line")
  run_stop_step=$(sed -E 's/.* at step ([0-9]+) .*/\1/' <<<"$line")
  run_stop_epoch=$(sed -E 's/.*\(epoch ([0-9]+)$/\1/' <<<"$line")
  [[ -n $line ]] || run_stop_signal="" run_stop_step="" run_stop_epoch=""
  run_first_exit=$({ grep -Eo "Exited with exit code [0-9]+|exited on signal [0-9]+|Killed" "$out" || true; } | head -1 |
    { grep -Eo "[0-9]+$|Killed$" || true; })
  run_requeued=no
  grep -q "job $id stopped at a checkpoint (time limit or preemption): requeueing" "$out" && run_requeued=yes
  run_attempts=$(grep -c "^job $id attempt [0-9]* on" "$out" || true)
  run_restarts=$(slurm_job_field "$id" Restarts)
  run_resumed_step=$({ grep -Eo "resuming run [0-9a-f]+ from .* step [0-9]+ in total" "$out" || true; } | head -1 |
    sed -E 's/.* step ([0-9]+) in total/\1/')
  run_state=$(slurm_job_field "$id" JobState)
  run_exit=$(slurm_job_field "$id" ExitCode)
  final=$(dtrain_final_checkpoint "$run_dir")
  run_final=${final##*/}
  run_identical=no
  if [[ -n $final ]] && cmp -s <(dtrain_checkpoint_tensors "$final") <(dtrain_checkpoint_tensors "$reference"); then
    run_identical=yes
  fi
}
