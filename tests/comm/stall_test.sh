#!/usr/bin/env bash
# The stall inspector from the command line. Runs dtrain-comm-stall-probe: one
# rank stalls (sleeps, or is stopped with SIGSTOP, before its third all-reduce; or fails its part of
# it and goes on elsewhere), and checks that
#   - every other rank logs a warning naming the stalled rank, by the warning time (+1 s of slack);
#   - without an abort time the job finishes (status 0) once the rank is back;
#   - with one, the job ends with a non-zero status, an error naming the rank, within the abort
#     time + 5 s of the stall's start.
#   stall_test.sh MPIEXEC "MPI FLAGS" PROBE NP BACKEND STALLED_RANK sleep:S|stop:S WARNING ABORT
set -uo pipefail
mpiexec=$1
read -r -a mpi_flags <<< "$2"
probe=$3 np=$4 backend=$5 stalled=$6 how=$7 warning=$8 abort=$9
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail() { echo "FAIL: $*"; cat "$log"; exit 1; }

timeout -s KILL 120 "$mpiexec" "${mpi_flags[@]}" -np "$np" -x DTRAIN_STALL_WARNING_SECONDS="$warning" \
  -x DTRAIN_STALL_ABORT_SECONDS="$abort" "$probe" "$backend" "$stalled" "$how" > "$log" 2>&1
status=$?
ended=$(date +%s.%N)
began=$(sed -n 's/^stall-probe: stall begins at \([0-9.]*\)$/\1/p' "$log")
[[ -n $began ]] || fail "the probe never reached the stall"
elapsed=$(echo "$ended - $began" | bc)
echo "status $status, job ended ${elapsed} s after the stall began"

# How the waiting ranks must describe the stalled one.
case $how in
  fail:*) named="has finished it" ;;
  *) named="has not begun it|did not answer" ;;
esac
for ((r = 0; r < np; ++r)); do
  [[ $r -eq $stalled ]] && continue
  line=$(grep -E "\[[^]]*:$r/$np\] WARN  stall: $backend .*waiting for world rank\(s\) $stalled: rank $stalled on \S+ ($named)" "$log" | head -1)
  [[ -n $line ]] || fail "rank $r logged no warning naming rank $stalled"
  waited=$(echo "$line" | sed -n 's/.*has waited \([0-9.]*\) s.*/\1/p')
  (( $(echo "$waited <= $warning + 1" | bc) )) || fail "rank $r warned after ${waited} s, warning time ${warning} s"
  echo "rank $r: $line"
done

if [[ $abort == 0 ]]; then
  [[ $status -eq 0 ]] || fail "exit status $status without an abort time"
  [[ $(grep -c '^stall-probe: done' "$log") -eq $np ]] || fail "not every rank finished"
else
  [[ $status -ne 0 ]] || fail "exit status 0, expected the job to abort"
  grep -qE "\] ERROR stall: [a-z-]+ .*waiting for world rank\(s\) $stalled: .*aborting the job \(stall_abort_seconds $abort\)" "$log" ||
    fail "no error line naming rank $stalled and the abort"
  (( $(echo "$elapsed <= $abort + 5" | bc) )) || fail "the job ended ${elapsed} s after the stall, abort time ${abort} s"
fi
echo "PASS"
