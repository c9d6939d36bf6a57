#include "launcher/host_list.h"

#include <cstdint>
#include <limits>
#include <map>
#include <sstream>

#include "runtime/base/env.h"
#include "runtime/base/error.h"

namespace dtrain::launcher {
namespace {

// Host names as DNS allows them (letters, digits, '-', '.'), plus '_' seen in cluster naming.
bool valid_host(const std::string& host) {
  if (host.empty() || host.front() == '-') return false;
  for (char c : host) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_')) return false;
  }
  return true;
}

int parse_slots(const std::string& text, const std::string& where) {
  return static_cast<int>(
      runtime::parse_int_in_range(text, 1, std::numeric_limits<int>::max(), where + ": slot count"));
}

}  // namespace

std::vector<HostSlots> parse_host_list(const std::string& text) {
  std::vector<HostSlots> hosts;
  std::stringstream in(text);
  for (std::string entry; std::getline(in, entry, ',');) {
    const std::string where = "-H entry '" + entry + "'";
    const size_t colon = entry.find(':');
    HostSlots h;
    h.host = entry.substr(0, colon);
    DTRAIN_USAGE_CHECK(valid_host(h.host)) << where << ": '" << h.host << "' is not a host name";
    if (colon != std::string::npos) h.slots = parse_slots(entry.substr(colon + 1), where);
    hosts.push_back(h);
  }
  DTRAIN_USAGE_CHECK(!hosts.empty() && text.back() != ',')
      << "-H '" << text << "': expected host:slots[,host:slots...]";
  return hosts;
}

std::vector<HostSlots> parse_hostfile(const std::string& contents, const std::string& path) {
  std::vector<HostSlots> hosts;
  std::map<std::string, size_t> index;  // host -> its entry in `hosts`
  std::stringstream in(contents);
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    const std::string where = path + ":" + std::to_string(line_number);
    line = line.substr(0, line.find('#'));
    std::stringstream words(line);
    std::string host;
    if (!(words >> host)) continue;  // blank or comment
    HostSlots h{host, 1};
    const size_t colon = host.find(':');
    if (colon != std::string::npos) {  // "node1:4", as -H writes it
      h.host = host.substr(0, colon);
      h.slots = parse_slots(host.substr(colon + 1), where);
    }
    DTRAIN_USAGE_CHECK(valid_host(h.host))
        << where << ": '" << h.host << "' is not a host name (expected 'host slots=N', 'host:N' or 'host')";
    for (std::string word; words >> word;) {
      const size_t eq = word.find('=');
      const std::string key = word.substr(0, eq);
      DTRAIN_USAGE_CHECK(eq != std::string::npos && (key == "slots" || key == "max_slots" || key == "max-slots"))
          << where << ": unknown field '" << word << "' (expected 'host slots=N', 'host:N' or 'host')";
      if (key == "slots") h.slots = parse_slots(word.substr(eq + 1), where);
    }
    // A host named again adds its slots (Open MPI's format of one line per slot).
    const auto [at, inserted] = index.emplace(h.host, hosts.size());
    if (inserted) {
      hosts.push_back(h);
    } else {
      DTRAIN_USAGE_CHECK(hosts[at->second].slots <= std::numeric_limits<int>::max() - h.slots)
          << where << ": the slots of host '" << h.host << "' add up past the largest rank count";
      hosts[at->second].slots += h.slots;
    }
  }
  DTRAIN_USAGE_CHECK(!hosts.empty()) << path << ": no hosts in the hostfile";
  return hosts;
}

int total_slots(const std::vector<HostSlots>& hosts) {
  // Summed wide: a:2147483647,b:1 wrapped to -2147483648 and became "mpirun -np -2147483648".
  int64_t total = 0;
  for (const HostSlots& h : hosts) {
    total += h.slots;
    DTRAIN_USAGE_CHECK(total <= std::numeric_limits<int>::max())
        << "the slot counts add up to " << total << " by host '" << h.host << "', more than the largest rank count "
        << std::numeric_limits<int>::max();
  }
  return static_cast<int>(total);
}

}  // namespace dtrain::launcher
