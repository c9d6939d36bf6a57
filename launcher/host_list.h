#pragma once
// Where a job's ranks go: hosts with slot counts, from `-H node1:4,node2:4` or an Open MPI-style
// hostfile ("node1 slots=4", "node1:4" or "node1", "# comments", blank lines; a host named on
// several lines gets the sum of their slots, as Open MPI's one line per slot). Bad input is a
// UsageError naming the entry (and the file and line).
#include <string>
#include <vector>

namespace dtrain::launcher {

struct HostSlots {
  std::string host;
  int slots = 1;
};

// "node1:4,node2:4"; a host without ":N" has 1 slot.
std::vector<HostSlots> parse_host_list(const std::string& text);

// The hostfile's contents (`path` only names it in errors).
std::vector<HostSlots> parse_hostfile(const std::string& contents, const std::string& path);

// The sum; a UsageError naming the host where it passes the largest int (a rank count).
int total_slots(const std::vector<HostSlots>& hosts);

}  // namespace dtrain::launcher
