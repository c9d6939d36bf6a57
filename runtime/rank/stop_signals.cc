#include "runtime/rank/stop_signals.h"

#include <signal.h>

#include <atomic>
#include <cctype>
#include <sstream>

#include "runtime/base/error.h"

namespace dtrain::runtime {
namespace {

std::atomic<int> received{0};
std::vector<int> installed;

void record(int signal_number) {
  int none = 0;
  received.compare_exchange_strong(none, signal_number);
}

struct NamedSignal {
  const char* name;
  int number;
};
constexpr NamedSignal kNames[] = {{"TERM", SIGTERM}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"INT", SIGINT},
                                  {"HUP", SIGHUP},   {"QUIT", SIGQUIT}, {"XCPU", SIGXCPU}};

}  // namespace

std::vector<int> parse_signal_list(const std::string& list, const std::string& what) {
  std::vector<int> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    std::string name = item;
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (name.rfind("SIG", 0) == 0) name = name.substr(3);
    int number = 0;
    for (const NamedSignal& s : kNames) {
      if (name == s.name || name == std::to_string(s.number)) number = s.number;
    }
    DTRAIN_USAGE_CHECK(number != 0) << what << " '" << list << "': '" << item
                                    << "' is not a stop signal (use TERM, USR1, USR2, INT, HUP, QUIT or XCPU)";
    out.push_back(number);
  }
  return out;
}

void install_stop_signals(const std::vector<int>& signals) {
  for (int s : installed) ::signal(s, SIG_DFL);
  installed = signals;  // a signal already recorded stays recorded: the program still stops
  struct sigaction action = {};
  action.sa_handler = record;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a blocking read in progress resumes instead of failing with EINTR
  for (int s : signals) {
    DTRAIN_CHECK(sigaction(s, &action, nullptr) == 0) << "sigaction(" << signal_name(s) << ") failed";
  }
}

int stop_signal_received() {
  return received.load(std::memory_order_relaxed);
}

std::string signal_name(int signal_number) {
  for (const NamedSignal& s : kNames) {
    if (s.number == signal_number) return std::string("SIG") + s.name;
  }
  return "signal " + std::to_string(signal_number);
}

}  // namespace dtrain::runtime
