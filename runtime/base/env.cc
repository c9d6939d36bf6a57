#include "runtime/base/env.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "runtime/base/error.h"

extern char** environ;

namespace dtrain::runtime {

std::optional<std::string> env_string(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

int64_t parse_int_in_range(const std::string& text, int64_t min_value, int64_t max_value, const std::string& source) {
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(text.c_str(), &end, 10);
  DTRAIN_USAGE_CHECK(!text.empty() && end != text.c_str() && *end == '\0' && errno == 0)
      << source << "='" << text << "' is not an integer";
  DTRAIN_USAGE_CHECK(parsed >= min_value && parsed <= max_value)
      << source << "=" << parsed << " is out of range [" << min_value << ", " << max_value << "]";
  return parsed;
}

std::optional<int64_t> env_int(const char* name, int64_t min_value, int64_t max_value) {
  const std::optional<std::string> text = env_string(name);
  if (!text) return std::nullopt;
  return parse_int_in_range(*text, min_value, max_value, name);
}

std::vector<std::string> unread_dtrain_variables() {
  // Every DTRAIN_* a tool, the library or a shipped script reads (docs/configuration.md).
  static const std::set<std::string> kRead = {"DTRAIN_BLAS_THREADS",
                                              "DTRAIN_CPU_BINDING",
                                              "DTRAIN_CUDA_GRAPHS",
                                              "DTRAIN_CYCLE_TIME_US",
                                              "DTRAIN_FAULT_INJECT",
                                              "DTRAIN_FAULT_INJECT_BACKWARD",
                                              "DTRAIN_FAULT_INJECT_SIGNAL",
                                              "DTRAIN_FAULT_INJECT_TRAINER",
                                              "DTRAIN_FUSION_THRESHOLD",
                                              "DTRAIN_GPU_BACKEND",
                                              "DTRAIN_LOG_LEVEL",
                                              "DTRAIN_MPI_DEVICE_POINTERS",
                                              "DTRAIN_NCCL_ACROSS_NODES",
                                              "DTRAIN_PLAN_CACHE",
                                              "DTRAIN_RANKS_PER_NODE",
                                              "DTRAIN_RING_LANES",
                                              "DTRAIN_RING_SEGMENT_BYTES",
                                              "DTRAIN_RING_SMALL_BYTES",
                                              "DTRAIN_SHM_ALLREDUCE",
                                              "DTRAIN_SHM_CHUNK_BYTES",
                                              "DTRAIN_SHM_MIN_BYTES",
                                              "DTRAIN_SIMULATED_GPUS",
                                              "DTRAIN_STAGING_PIECE_BYTES",
                                              "DTRAIN_STAGING_TRACE",
                                              "DTRAIN_STALL_ABORT_SECONDS",
                                              "DTRAIN_STALL_WARNING_SECONDS",
                                              "DTRAIN_STREAM_FLAG_KERNELS",
                                              "DTRAIN_REQUIRE_GPU",
                                              "DTRAIN_TEST_FAILED_RANK_WAIT_SECONDS",
                                              "DTRAIN_DATA_DIR",
                                              "DTRAIN_RUN_DIR",
                                              "DTRAIN_BIN",
                                              "DTRAIN_CONFIG",
                                              "DTRAIN_EXTRA_ARGS",
                                              "DTRAIN_DRY_RUN",
                                              "DTRAIN_SIM_OWNER",
                                              "DTRAIN_SIM_STATE",
                                              "DTRAIN_LIBRARY"};
  std::vector<std::string> unread;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (name.rfind("DTRAIN_", 0) != 0 || name.rfind("DTRAIN_TEST_", 0) == 0 || kRead.count(name)) continue;
    unread.push_back(name);
  }
  return unread;
}

}  // namespace dtrain::runtime
