#include "models/conv_plan_file.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/base/log.h"

namespace dtrain::models {
namespace {

// `text` as a whole decimal integer.
bool parse_int64(const std::string& text, int64_t* value) {
  if (text.empty()) return false;
  size_t used = 0;
  try {
    *value = std::stoll(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  return used == text.size();
}

// The value of `name=` in `field`.
bool field_value(const std::string& field, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (field.size() <= n || field.compare(0, n, name) != 0 || field[n] != '=') return false;
  *value = field.substr(n + 1);
  return true;
}

}  // namespace

std::string format_conv_plan_line(const std::string& key, const StoredConvPlan& plan) {
  std::ostringstream line;
  line << key << " engine=" << plan.engine << " knobs=";
  for (size_t i = 0; i < plan.knobs.size(); ++i) {
    line << (i ? "," : "") << plan.knobs[i].first << ":" << plan.knobs[i].second;
  }
  char ms[32];
  std::snprintf(ms, sizeof(ms), "%.6g", static_cast<double>(plan.measured_ms));
  line << " ms=" << ms;
  return line.str();
}

bool parse_conv_plan_line(const std::string& line, std::string* key, StoredConvPlan* plan) {
  std::istringstream fields(line);
  std::string k, engine, knobs, ms, extra;
  if (!(fields >> k >> engine >> knobs >> ms) || (fields >> extra)) return false;
  std::string value;
  StoredConvPlan p;
  if (!field_value(engine, "engine", &value) || !parse_int64(value, &p.engine) || p.engine < 0) return false;
  if (!field_value(ms, "ms", &value)) return false;
  try {
    size_t used = 0;
    p.measured_ms = std::stof(value, &used);
    if (used != value.size() || !(p.measured_ms >= 0)) return false;
  } catch (const std::exception&) {
    return false;
  }
  if (knobs != "knobs=") {
    if (!field_value(knobs, "knobs", &value)) return false;
    std::istringstream list(value);
    std::string pair;
    while (std::getline(list, pair, ',')) {
      const size_t colon = pair.find(':');
      int64_t type = 0, choice = 0;
      if (colon == std::string::npos || !parse_int64(pair.substr(0, colon), &type) ||
          !parse_int64(pair.substr(colon + 1), &choice) || type < 0)
        return false;
      p.knobs.emplace_back(type, choice);
    }
    if (p.knobs.empty() || value.back() == ',') return false;
  }
  *key = k;
  *plan = std::move(p);
  return true;
}

StoredConvPlans read_conv_plan_file(const std::string& path, const std::string& header) {
  StoredConvPlans plans;
  std::ifstream in(path);
  if (!in) return plans;
  std::string line;
  if (!std::getline(in, line) || line != header) return plans;
  constexpr int kWarnings = 5;  // the first few malformed lines are named, the rest counted
  int malformed = 0;
  for (int number = 2; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    std::string key;
    StoredConvPlan plan;
    if (parse_conv_plan_line(line, &key, &plan)) {
      plans[key] = std::move(plan);
    } else if (++malformed <= kWarnings) {
      DTRAIN_LOG(kWarn) << path << ":" << number << ": not a convolution plan line, skipped: " << line.substr(0, 120);
    }
  }
  if (malformed > kWarnings) {
    DTRAIN_LOG(kWarn) << path << ": " << malformed << " lines in all were not convolution plan lines, skipped";
  }
  return plans;
}

// Not runtime::AtomicFile: the ranks of a node write this file at the same time, and would share its
// PATH.tmp. Nor flushed to the disk: a cache lost in a crash is measured again.
bool write_conv_plan_file(const std::string& path, const std::string& header, const StoredConvPlans& plans,
                          std::string* error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target(path);
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec) {
      *error = "cannot create " + target.parent_path().string() + ": " + ec.message();
      return false;
    }
  }
  // Unique per process across hosts too: ranks of several nodes may share the folder (NFS home),
  // and containers repeat pids.
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const std::string temporary = path + ".tmp." + host + "." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    if (!out) {
      *error = "cannot create " + temporary;
      return false;
    }
    out << header << "\n";
    for (const auto& [key, plan] : plans) out << format_conv_plan_line(key, plan) << "\n";
    out.flush();
    if (!out) {
      *error = "writing " + temporary + " failed (disk full?)";
      out.close();
      fs::remove(temporary, ec);
      return false;
    }
  }
  fs::rename(temporary, target, ec);
  if (ec) {
    *error = "cannot rename " + temporary + " to " + path + ": " + ec.message();
    fs::remove(temporary, ec);
    return false;
  }
  return true;
}

}  // namespace dtrain::models
