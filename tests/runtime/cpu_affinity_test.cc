// CPU lists and each rank's share of a host's CPUs (runtime/rank/cpu_affinity.h).
#include "runtime/rank/cpu_affinity.h"

#include <gtest/gtest.h>

#include "runtime/base/error.h"

namespace dtrain::runtime {
namespace {

TEST(CpuAffinity, ParsesLinuxCpuLists) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11\n", "x"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("5", "x"), (std::vector<int>{5}));
  EXPECT_EQ(parse_cpu_list("3,1-2,2", "x"), (std::vector<int>{1, 2, 3}));
  EXPECT_THROW(parse_cpu_list("0-a", "/sys/x"), UsageError);
  EXPECT_THROW(parse_cpu_list("4-2", "/sys/x"), UsageError);
}

TEST(CpuAffinity, EveryRankGetsAContiguousFairShare) {
  std::vector<int> cpus(32);
  for (int i = 0; i < 32; ++i) cpus[static_cast<size_t>(i)] = i;
  EXPECT_EQ(cpu_block(cpus, 1, 2).front(), 16);
  EXPECT_EQ(cpu_block(cpus, 1, 2).size(), 16u);
  // 10 CPUs over 4 ranks: 3, 3, 2, 2, covering each CPU once.
  const std::vector<int> ten(cpus.begin(), cpus.begin() + 10);
  std::vector<int> seen;
  for (int r = 0; r < 4; ++r) {
    const std::vector<int> block = cpu_block(ten, r, 4);
    EXPECT_EQ(block.size(), r < 2 ? 3u : 2u);
    seen.insert(seen.end(), block.begin(), block.end());
  }
  EXPECT_EQ(seen, ten);
  // More ranks than CPUs: one each, shared.
  EXPECT_EQ(cpu_block({4, 5}, 3, 4), (std::vector<int>{5}));
}

TEST(CpuAffinity, ARankCountsItsShareOfTheHostNotTheWholeHost) {
  EXPECT_EQ(cpus_in_share(64, 64, 4), 16);  // --bind-to none: every CPU allowed, a quarter counted
  EXPECT_EQ(cpus_in_share(64, 64, 1), 64);
  EXPECT_EQ(cpus_in_share(8, 64, 4), 8);    // a launcher's narrower binding is what it gets
  EXPECT_EQ(cpus_in_share(64, 66, 4), 16);  // a remainder is left over, not handed out
  EXPECT_EQ(cpus_in_share(2, 2, 4), 1);     // more ranks than CPUs: still one each
  EXPECT_EQ(cpus_in_share(4, 4, 0), 4);     // an unknown host size counts as one rank
  // This process: never more than its mask allows.
  EXPECT_LE(cpus_in_share(1), cpus_allowed());
  EXPECT_GE(cpus_in_share(4), 1);
}

TEST(CpuAffinity, ClaimingAShareNeverNarrowsTheMask) {
  const int before = cpus_allowed();
  const CpuShare share = claim_cpu_share(0, 1);
  EXPECT_GE(cpus_allowed(), before);
  EXPECT_EQ(share.allowed_after, cpus_allowed());
}

}  // namespace
}  // namespace dtrain::runtime
