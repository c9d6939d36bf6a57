# Sourced by the fault campaigns (kill_campaign.sh, stall_campaign.sh).
now() { date +%s.%N; }
# rank_pid BIN RANK: prints the pid of $BIN/dtrain-train's world rank RANK, nothing if none runs.
rank_pid() {
  local p
  for p in $(pgrep -f "$1/dtrain-train" 2>/dev/null); do
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then echo "$p"; return; fi
  done
}
# wait_job LAUNCHER BIN: waits up to 60 s for the job's launcher (a child of this shell) to end and
# sets JOB_STATUS to its exit status, or to "timeout" after killing whatever is left of the job.
wait_job() {
  JOB_STATUS=timeout
  local i
  for ((i = 0; i < 1200; i++)); do
    if ! kill -0 "$1" 2>/dev/null; then wait "$1"; JOB_STATUS=$?; return; fi
    sleep 0.05
  done
  kill -9 "$1" 2>/dev/null
  pkill -9 -f "$2/dtrain-train"
}
