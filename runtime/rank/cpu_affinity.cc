#include "runtime/rank/cpu_affinity.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "runtime/base/env.h"
#include "runtime/base/error.h"

namespace dtrain::runtime {
namespace {

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Online CPUs, narrowed to the cgroup's cpuset where one is visible (a container or a Slurm job).
std::vector<int> usable_cpus() {
  std::vector<int> cpus =
      parse_cpu_list(first_line("/sys/devices/system/cpu/online"), "/sys/devices/system/cpu/online");
  const std::string cgroup = first_line("/sys/fs/cgroup/cpuset.cpus.effective");
  if (!cgroup.empty()) {
    const std::vector<int> allowed = parse_cpu_list(cgroup, "/sys/fs/cgroup/cpuset.cpus.effective");
    std::vector<int> both;
    std::set_intersection(cpus.begin(), cpus.end(), allowed.begin(), allowed.end(), std::back_inserter(both));
    if (!both.empty()) cpus = both;
  }
  return cpus;
}

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::ostringstream text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    text << (i ? "," : "") << cpus[i];
    if (j > i) text << "-" << cpus[j];
    i = j + 1;
  }
  return text.str();
}

}  // namespace

std::vector<int> parse_cpu_list(const std::string& text, const std::string& what) {
  std::vector<int> cpus;
  std::string trimmed = text;
  while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.back()))) trimmed.pop_back();
  std::stringstream in(trimmed);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const size_t dash = item.find('-');
    const std::string lo_text = item.substr(0, dash);
    const std::string hi_text = dash == std::string::npos ? lo_text : item.substr(dash + 1);
    const std::string where = what + " (CPU list " + trimmed + "): CPU";
    const int lo = static_cast<int>(parse_int_in_range(lo_text, 0, CPU_SETSIZE - 1, where));
    const int hi = static_cast<int>(parse_int_in_range(hi_text, 0, CPU_SETSIZE - 1, where));
    DTRAIN_USAGE_CHECK(lo >= 0 && hi >= lo && hi < CPU_SETSIZE)
        << what << ": bad range '" << item << "' in '" << text << "'";
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::vector<int> cpu_block(const std::vector<int>& usable, int rank, int ranks) {
  DTRAIN_CHECK(ranks > 0 && rank >= 0 && rank < ranks) << "cpu_block: rank " << rank << " of " << ranks;
  const size_t n = usable.size(), per = n / static_cast<size_t>(ranks), extra = n % static_cast<size_t>(ranks);
  if (per == 0) return {usable[static_cast<size_t>(rank) % n]};  // more ranks than CPUs: one each, shared
  const size_t r = static_cast<size_t>(rank);
  const size_t begin = r * per + std::min(r, extra);
  const size_t size = per + (r < extra ? 1 : 0);
  return {usable.begin() + static_cast<long>(begin), usable.begin() + static_cast<long>(begin + size)};
}

int cpus_allowed() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return 1;
  return std::max(1, CPU_COUNT(&mask));
}

int cpus_in_share(int allowed, int usable, int host_local_size) {
  const int share = usable / std::max(1, host_local_size);
  return std::max(1, std::min(allowed, share));
}

int cpus_in_share(int host_local_size) {
  return cpus_in_share(cpus_allowed(), static_cast<int>(usable_cpus().size()), host_local_size);
}

std::string CpuShare::describe() const {
  std::ostringstream text;
  if (widened) {
    text << "the launcher bound this rank to " << allowed_before << " CPU(s); widened to its share of the host, CPUs "
         << cpu_list_text(cpus) << " (DTRAIN_CPU_BINDING=keep keeps the launcher's binding)";
  } else {
    text << allowed_after << " CPU(s) available to this rank";
  }
  return text.str();
}

CpuShare claim_cpu_share(int host_local_rank, int host_local_size) {
  CpuShare share;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  DTRAIN_CHECK(sched_getaffinity(0, sizeof(mask), &mask) == 0) << "sched_getaffinity failed";
  share.allowed_before = share.allowed_after = CPU_COUNT(&mask);
  const std::vector<int> usable = usable_cpus();
  if (usable.empty() || host_local_size < 1) return share;
  share.cpus = cpu_block(usable, host_local_rank % host_local_size, host_local_size);
  const std::optional<std::string> policy = env_string("DTRAIN_CPU_BINDING");
  DTRAIN_USAGE_CHECK(!policy || *policy == "keep" || *policy == "share")
      << "DTRAIN_CPU_BINDING='" << *policy << "': expected keep or share";
  if ((policy && *policy == "keep") || share.allowed_before >= static_cast<int>(share.cpus.size())) return share;
  cpu_set_t wider;
  CPU_ZERO(&wider);
  for (int c : share.cpus) CPU_SET(c, &wider);
  if (sched_setaffinity(0, sizeof(wider), &wider) != 0) return share;  // not allowed here: keep what we have
  share.widened = true;
  share.allowed_after = static_cast<int>(share.cpus.size());
  return share;
}

}  // namespace dtrain::runtime
