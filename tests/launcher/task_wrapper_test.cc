// dtrain-run --as-task: the task's exit status is the program's own, except that a stop signal
// passed on from outside (srun ending the step after another task failed) becomes status 1.
#include "launcher/task_wrapper.h"

#include <gtest/gtest.h>

#include "runtime/core/error.h"

namespace dtrain::launcher {
namespace {

TEST(TaskWrapper, ReturnsTheProgramsExitStatus) {
  EXPECT_EQ(run_as_task({"/bin/sh", "-c", "exit 0"}), 0);
  EXPECT_EQ(run_as_task({"/bin/sh", "-c", "exit 3"}), 3);
  EXPECT_EQ(run_as_task({"sh", "-c", "exit 42"}), 42);  // found on PATH
}

TEST(TaskWrapper, ACrashIsReportedAs128PlusTheSignal) {
  EXPECT_EQ(run_as_task({"/bin/sh", "-c", "kill -SEGV $$"}), 128 + 11);
  EXPECT_EQ(run_as_task({"/bin/sh", "-c", "kill -TERM $$"}), 128 + 15);  // its own SIGTERM, not passed on
}

TEST(TaskWrapper, AStopSignalFromOutsideIsPassedOnAndBecomesStatusOne) {
  // The program signals its parent, the wrapper (this test process), which must pass SIGTERM on
  // to it; the program then dies of it well before its sleep ends.
  EXPECT_EQ(run_as_task({"/bin/sh", "-c", "kill -TERM $PPID; sleep 30"}), kStoppedFromOutsideStatus);
}

TEST(TaskWrapper, OtherSignalsArePassedOnToo) {
  // SIGUSR1 (Slurm's --signal ahead of a time limit) reaches the program, which may handle it.
  EXPECT_EQ(run_as_task({"/bin/sh", "-c", "trap 'exit 7' USR1; kill -USR1 $PPID; sleep 30 & wait"}), 7);
}

TEST(TaskWrapper, AMissingProgramIs127AndNoProgramIsAUsageError) {
  EXPECT_EQ(run_as_task({"/no/such/program"}), 127);
  EXPECT_THROW(run_as_task({}), core::UsageError);
}

}  // namespace
}  // namespace dtrain::launcher
