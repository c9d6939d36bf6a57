#pragma once
// Which CPUs a rank's threads (the loader's decoders above all) may run on.
//
// mpirun binds each rank to ONE core by default when it starts two ranks or fewer per host (Open
// MPI's --bind-to core), and every thread a process starts inherits that mask. A rank with a
// 14-thread JPEG loader then decodes on a single core while the rest of the machine idles: this is
// what made dtrain-train on JPEGs run at 59 img/s per GPU. So a rank takes its fair share of the
// host: the host's usable CPUs (online, inside the cgroup's cpuset) cut into equal contiguous
// blocks, one per rank on the host. A binding that already gives the rank at least its share is
// kept, and DTRAIN_CPU_BINDING=keep keeps whatever the launcher chose.
#include <string>
#include <vector>

namespace dtrain::runtime {

struct CpuShare {
  std::vector<int> cpus;   // the share of this rank
  int allowed_before = 0;  // CPUs the launcher's mask allowed
  int allowed_after = 0;   // CPUs the process may use now
  bool widened = false;
  std::string describe() const;
};

// The CPUs in a Linux CPU list ("0-3,8,10-11"); a UsageError naming `what` when malformed.
std::vector<int> parse_cpu_list(const std::string& text, const std::string& what);

// Block `rank` of `ranks` equal contiguous blocks of `usable` (the first blocks one larger when
// the count does not divide).
std::vector<int> cpu_block(const std::vector<int>& usable, int rank, int ranks);

// Widens this process's CPU mask to its share when the launcher's mask is narrower (see above).
// Call from main() before starting threads: threads started later inherit the mask.
CpuShare claim_cpu_share(int host_local_rank, int host_local_size);

// CPUs the calling thread may run on.
int cpus_allowed();

// How many CPUs this rank may count as its own: its share of the host (the usable CPUs over the
// ranks on the host), or fewer where its mask allows fewer. A rank started with --bind-to none may
// run anywhere, but sizing its threads by the whole host would start, on 4 ranks of a 64-CPU host,
// 4 x 62 loader threads that crowd out each other and the host's gradient ring.
int cpus_in_share(int host_local_size);
int cpus_in_share(int allowed, int usable, int host_local_size);  // the rule, for tests

}  // namespace dtrain::runtime
