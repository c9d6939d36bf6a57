#include "comm/diagnostics/fault_injection.h"

#include <csignal>
#include <cstdint>
#include <string>

#include "runtime/base/env.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/base/process_identity.h"
#include "runtime/rank/stop_signals.h"

namespace dtrain::comm {

FaultPlan fault_plan_from_env(const char* variable) {
  FaultPlan plan;
  plan.variable = variable;
  const std::optional<std::string> text = runtime::env_string(variable);
  if (!text) return plan;
  const size_t comma = text->find(',');
  const std::string source = std::string(variable) + " (K, K,R or K,R,stop)";
  plan.at_operation = static_cast<uint64_t>(runtime::parse_int_in_range(text->substr(0, comma), 1, INT64_MAX, source));
  if (comma != std::string::npos) {
    std::string rank = text->substr(comma + 1);
    const size_t second = rank.find(',');
    if (second != std::string::npos) {
      DTRAIN_USAGE_CHECK(rank.substr(second + 1) == "stop") << source << ": the third field can only be 'stop'";
      plan.stop = true;
      rank.resize(second);
    }
    plan.only_world_rank = static_cast<int>(runtime::parse_int_in_range(rank, 0, INT32_MAX, source));
  }
  return plan;
}

uint64_t backward_fault_step_from_env() {
  const std::optional<int64_t> step = runtime::env_int("DTRAIN_FAULT_INJECT_BACKWARD", 1, INT64_MAX);
  return step ? static_cast<uint64_t>(*step) : 0;
}

void raise_injected_signal(const char* phase) {
  const char* variable = "DTRAIN_FAULT_INJECT_SIGNAL";
  const std::optional<std::string> text = runtime::env_string(variable);
  if (!text) return;
  const std::string source = std::string(variable) + " (PHASE,SIGNAL or PHASE,SIGNAL,R)";
  const size_t first = text->find(',');
  DTRAIN_USAGE_CHECK(first != std::string::npos) << source << ": '" << *text << "' names no signal";
  if (text->substr(0, first) != phase) return;
  std::string signal = text->substr(first + 1);
  const size_t second = signal.find(',');
  if (second != std::string::npos) {
    const int rank = static_cast<int>(runtime::parse_int_in_range(signal.substr(second + 1), 0, INT32_MAX, source));
    if (rank != runtime::process_identity().world_rank) return;
    signal.resize(second);
  }
  const std::vector<int> signals = runtime::parse_signal_list(signal, source);
  DTRAIN_USAGE_CHECK(signals.size() == 1) << source << ": name one signal, got '" << signal << "'";
  runtime::write_log_line(runtime::LogLevel::kWarn, std::string("injected signal (") + variable + "): sending " +
                                                        runtime::signal_name(signals[0]) + " to this process at " +
                                                        phase);
  raise(signals[0]);
}

void FaultInjector::on_operation(const char* backend, const Collective& call) {
  const uint64_t n = ++operations_;
  if (plan_.at_operation == 0 || n != plan_.at_operation) return;
  trigger(std::string(backend) + " operation " + std::to_string(n) + ", " + describe(call));
}

void FaultInjector::on_operation(const char* what) {
  const uint64_t n = ++operations_;
  if (plan_.at_operation == 0 || n != plan_.at_operation) return;
  trigger(std::string(what) + " (operation " + std::to_string(n) + ")");
}

void FaultInjector::trigger(const std::string& operation) {
  const int rank = runtime::process_identity().world_rank;
  if (plan_.only_world_rank >= 0 && rank != plan_.only_world_rank) return;
  if (plan_.stop) {
    runtime::write_log_line(runtime::LogLevel::kWarn, std::string("injected stall (") + plan_.variable +
                                                          "): stopping this process (SIGSTOP) at " + operation);
    raise(SIGSTOP);
    return;
  }
  DTRAIN_FAIL() << "injected fault (" << plan_.variable << "): " << operation << ", failed on purpose on world rank "
                << rank;
}

}  // namespace dtrain::comm
