#include "launcher/task_wrapper.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/base/error.h"

namespace dtrain::launcher {
namespace {

volatile sig_atomic_t child_pid = 0;
volatile sig_atomic_t forwarded_stop_signal = 0;

bool is_stop_signal(int signal_number) {
  return signal_number == SIGTERM || signal_number == SIGINT || signal_number == SIGHUP || signal_number == SIGKILL;
}

void forward_signal(int signal_number) {
  if (is_stop_signal(signal_number)) forwarded_stop_signal = signal_number;
  if (child_pid > 0) kill(child_pid, signal_number);
}

// The signals a job scheduler or a user sends to a job: stop requests, and the user signals
// Slurm's --signal delivers ahead of a time limit. All go on to the program.
constexpr int kForwardedSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT};

}  // namespace

int run_as_task(const std::vector<std::string>& program) {
  DTRAIN_USAGE_CHECK(!program.empty()) << "dtrain-run --as-task: no program given";
  // The signals stay blocked from before the handlers are installed until the child's pid is
  // recorded: one that arrived in between (after fork(), before child_pid was set) was handled with
  // no child to pass it to, and lost. Blocked, it waits and is passed on once the pid is known. The
  // child, which inherits the blocked mask, resets the handlers and only then restores the mask, so
  // a signal sent to it meanwhile acts on it as on the program.
  sigset_t forwarded;
  sigemptyset(&forwarded);
  for (const int s : kForwardedSignals) sigaddset(&forwarded, s);
  sigset_t previous_mask;
  sigprocmask(SIG_BLOCK, &forwarded, &previous_mask);
  struct sigaction action {};
  action.sa_handler = forward_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  constexpr size_t kCount = sizeof(kForwardedSignals) / sizeof(kForwardedSignals[0]);
  struct sigaction previous[kCount] {};
  for (size_t i = 0; i < kCount; ++i) sigaction(kForwardedSignals[i], &action, &previous[i]);
  forwarded_stop_signal = 0;

  const pid_t pid = fork();
  if (pid < 0) {
    const int fork_error = errno;
    for (size_t i = 0; i < kCount; ++i) sigaction(kForwardedSignals[i], &previous[i], nullptr);
    sigprocmask(SIG_SETMASK, &previous_mask, nullptr);
    DTRAIN_FAIL() << "dtrain-run --as-task: fork failed: " << std::strerror(fork_error);
  }
  if (pid == 0) {
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    for (const int s : kForwardedSignals) sigaction(s, &default_action, nullptr);
    sigprocmask(SIG_SETMASK, &previous_mask, nullptr);
    std::vector<char*> args;
    for (const std::string& a : program) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "dtrain-run --as-task: cannot start %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  child_pid = pid;
  sigprocmask(SIG_SETMASK, &previous_mask, nullptr);  // what arrived since the block is passed on now

  int status = 0;
  int waited = 0;
  while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  const int wait_error = errno;
  child_pid = 0;
  // The stop signal that ended the program: its death by one, or an exit status of 128 + one, as a
  // shell program (sh -c, a job script) reports the death of the child it waited for.
  int signal_number = 0;
  if (waited == pid && WIFSIGNALED(status)) signal_number = WTERMSIG(status);
  if (waited == pid && WIFEXITED(status) && WEXITSTATUS(status) > 128) signal_number = WEXITSTATUS(status) - 128;
  // slurmstepd signals every process of the task at once, so the program can die of the stop
  // signal before this wrapper's own copy is handled: give that copy a moment to arrive before
  // taking the death as the program's own (under load it came after waitpid returned).
  const bool stop_signal_death = signal_number != 0 && is_stop_signal(signal_number);
  if (stop_signal_death) {
    for (int ms = 0; forwarded_stop_signal == 0 && ms < 1000; ms += 10) usleep(10'000);
  }
  for (size_t i = 0; i < kCount; ++i) sigaction(kForwardedSignals[i], &previous[i], nullptr);
  DTRAIN_CHECK(waited == pid) << "dtrain-run --as-task: waitpid failed: " << std::strerror(wait_error);
  if (forwarded_stop_signal != 0 && stop_signal_death) {
    const char* rank = std::getenv("SLURM_PROCID");
    std::fprintf(stderr, "dtrain-run: rank %s stopped by signal %d (%s): the job is being ended from outside\n",
                 rank != nullptr ? rank : "?", signal_number, strsignal(signal_number));
    return kStoppedFromOutsideStatus;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

}  // namespace dtrain::launcher
