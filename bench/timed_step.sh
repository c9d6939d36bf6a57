# Sourced by the GPU benchmark scripts: step NAME LIMIT_S COMMAND... runs COMMAND under `timeout`,
# logs to $OUT/NAME.log and appends its verdict (PASS, FAIL, HUNG) and seconds to $OUT/steps.txt, so
# one call's runs read as one table and a hang costs LIMIT_S, not the device call. Each row ends
# with the host's load when the run started (1-minute average, running/all tasks from
# /proc/loadavg): a run that starts on a busy host (another job, a stray process from an earlier
# one) says so beside its number.
step() {
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  local load
  load=$(cut -d' ' -f1,4 /proc/loadavg 2> /dev/null || echo "?")
  timeout -k 10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local verdict=PASS
  [[ $rc -eq 0 ]] || verdict="FAIL (rc $rc)"
  [[ $rc -eq 124 || $rc -eq 137 ]] && verdict="HUNG (killed after ${limit} s)"
  grep -q "WATCHDOG" "$OUT/$name.log" && verdict="HUNG (watchdog)"
  printf "%-44s %-28s %4d s   load at start %s\n" "$name" "$verdict" $((SECONDS - start)) "$load" | tee -a "$OUT/steps.txt"
}
