// dtrain-run --as-task: the task's exit status is the program's own, except that a stop signal
// passed on from outside (srun ending the step after another task failed) becomes status 1.
#include "launcher/task_wrapper.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "runtime/base/error.h"

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

// A shell program reports its child's death by SIGTERM as exit status 143 (128 + 15), and may exit
// before the wrapper's own copy of the job's SIGTERM is handled: that is a stop from outside too
// (cluster.slurm.sbatch ended 'FAILED 143:0' once in 9 runs under load). Without a stop signal
// passed on, 143 stays the program's own status.
TEST(TaskWrapper, AShellReportingItsChildsStopSignalIsAStopFromOutside) {
  EXPECT_EQ(run_as_task({"/bin/sh", "-c", "trap 'exit 143' TERM; kill -TERM $PPID; sleep 30 & wait"}),
            kStoppedFromOutsideStatus);
  EXPECT_EQ(run_as_task({"/bin/sh", "-c", "exit 143"}), 143);
}

TEST(TaskWrapper, OtherSignalsArePassedOnToo) {
  // SIGUSR1 (Slurm's --signal ahead of a time limit) reaches the program, which may handle it.
  EXPECT_EQ(run_as_task({"/bin/sh", "-c", "trap 'exit 7' USR1; kill -USR1 $PPID; sleep 30 & wait"}), 7);
}

volatile sig_atomic_t early_signals = 0;
void count_early_signal(int) {
  early_signals = early_signals + 1;
}

// A SIGTERM that reaches the wrapper as soon as its handler is in place (while it forks, before it
// has recorded the child's pid) must still be passed on: before, the handler found no child to
// pass it to and the signal was lost, so the program ran to its end (here a 3 s sleep, status 0).
// The sender thread blocks the signal itself, so that it is delivered to the wrapper's thread.
TEST(TaskWrapper, AStopSignalWhileTheChildStartsIsPassedOn) {
  struct sigaction counting {};
  counting.sa_handler = count_early_signal;
  sigemptyset(&counting.sa_mask);
  struct sigaction before {};
  sigaction(SIGTERM, &counting, &before);
  for (int trial = 0; trial < 20; ++trial) {
    std::atomic<bool> done{false};
    std::thread sender([&] {
      sigset_t all;
      sigfillset(&all);
      pthread_sigmask(SIG_BLOCK, &all, nullptr);
      struct sigaction now {};
      // Wait for the wrapper's handler, then signal the process at once.
      do {
        sigaction(SIGTERM, nullptr, &now);
      } while (now.sa_handler == count_early_signal && !done.load());
      if (!done.load()) kill(getpid(), SIGTERM);
    });
    const auto start = std::chrono::steady_clock::now();
    const int status = run_as_task({"/bin/sleep", "3"});
    done = true;
    sender.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(status, kStoppedFromOutsideStatus) << "trial " << trial;
    EXPECT_LT(seconds, 2.0) << "trial " << trial << ": the signal was not passed on";
  }
  EXPECT_EQ(early_signals, 0);
  sigaction(SIGTERM, &before, nullptr);
}

TEST(TaskWrapper, AMissingProgramIs127AndNoProgramIsAUsageError) {
  EXPECT_EQ(run_as_task({"/no/such/program"}), 127);
  EXPECT_THROW(run_as_task({}), runtime::UsageError);
}

}  // namespace
}  // namespace dtrain::launcher
