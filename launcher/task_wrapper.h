#pragma once
// One task of an srun launch, run through dtrain-run (`dtrain-run --as-task -- PROGRAM ARGS`).
//
// Why: srun --kill-on-bad-exit ends the other tasks with SIGTERM when one fails, and srun's exit
// status is the highest over the tasks, counting a signal as 128 + signal. A rank that exits 3
// would so surface as 143 (the SIGTERM of its peers), hiding the real status. The wrapper runs
// PROGRAM as a child, passes every signal it gets on to it, and when PROGRAM dies of a stop
// signal (or exits 128 + one, as a shell reports its child's death) while the wrapper passed one
// on (the job is being ended from outside), exits 1 instead: the job's
// status is then the failed rank's own, and the job state (FAILED, CANCELLED) still tells a
// cancellation apart. Any other ending of PROGRAM is returned unchanged (a crash by signal S as
// 128 + S, as a shell reports it).
#include <string>
#include <vector>

namespace dtrain::launcher {

// Exit status for a task whose program was ended by a stop signal sent to the whole job.
inline constexpr int kStoppedFromOutsideStatus = 1;

// Runs program (program[0] a path or a name on PATH) to its end; returns the task's exit status.
int run_as_task(const std::vector<std::string>& program);

}  // namespace dtrain::launcher
