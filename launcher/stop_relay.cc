#include "launcher/stop_relay.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "runtime/base/error.h"

namespace dtrain::launcher {
namespace {

std::atomic<pid_t> child{0};
std::atomic<int> relayed_signal{SIGUSR1};
std::atomic<int> stops_seen{0};

// Async-signal-safe: kill() and write() only.
void relay(int signal_number) {
  const pid_t to = child.load();
  if (to <= 0) return;
  int sent = signal_number;
  if (signal_number == SIGTERM || signal_number == SIGINT) {
    sent = stops_seen.fetch_add(1) == 0 ? relayed_signal.load() : SIGTERM;
    const char* text = sent == SIGTERM ? "dtrain-run: second stop signal: passing SIGTERM on (a hard stop)\n"
                                       : "dtrain-run: stop signal: asking the ranks to checkpoint and stop "
                                         "(again for a hard stop)\n";
    [[maybe_unused]] const ssize_t n = write(STDERR_FILENO, text, std::strlen(text));
  }
  kill(to, sent);
}

constexpr int kRelayed[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

// In the child, between fork and exec: async-signal-safe calls only.
[[noreturn]] void become_command(char* const* args, bool own_group) {
  for (int s : kRelayed) signal(s, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (own_group) {
    setpgid(0, 0);
    if (isatty(STDIN_FILENO)) {
      const int null = open("/dev/null", O_RDONLY);
      if (null >= 0) dup2(null, STDIN_FILENO);
    }
  }
  execvp(args[0], args);
  const int error = errno;
  const char* text = "dtrain-run: cannot start the job command: ";
  [[maybe_unused]] ssize_t n = write(STDERR_FILENO, text, std::strlen(text));
  n = write(STDERR_FILENO, args[0], std::strlen(args[0]));
  n = write(STDERR_FILENO, ": ", 2);
  n = write(STDERR_FILENO, std::strerror(error), std::strlen(std::strerror(error)));
  n = write(STDERR_FILENO, "\n", 1);
  _exit(127);
}

}  // namespace

int run_relaying_stop_signals(const std::vector<std::string>& argv, int relayed) {
  DTRAIN_CHECK(!argv.empty()) << "dtrain-run: empty job command";
  relayed_signal = relayed;
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // Blocked until the child's pid is known, so no signal between fork and here is lost.
  sigset_t stops, previous;
  sigemptyset(&stops);
  for (int s : kRelayed) sigaddset(&stops, s);
  sigprocmask(SIG_BLOCK, &stops, &previous);
  struct sigaction action = {};
  action.sa_handler = relay;
  sigemptyset(&action.sa_mask);
  for (int s : kRelayed) sigaction(s, &action, nullptr);
  std::cout.flush();
  std::cerr.flush();
  // With a controlling terminal, Ctrl-C goes to the foreground process group: dtrain-run's alone.
  const int terminal = open("/dev/tty", O_RDONLY | O_CLOEXEC);
  const bool own_group = terminal >= 0;
  if (terminal >= 0) close(terminal);
  const pid_t pid = fork();
  if (pid == 0) become_command(args.data(), own_group);
  const int fork_error = errno;
  if (pid > 0) child = pid;
  sigprocmask(SIG_SETMASK, &previous, nullptr);
  DTRAIN_USAGE_CHECK(pid > 0) << "dtrain-run: cannot start " << argv[0] << ": " << std::strerror(fork_error);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    DTRAIN_CHECK(errno == EINTR) << "dtrain-run: waitpid(" << argv[0] << "): " << std::strerror(errno);
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace dtrain::launcher
