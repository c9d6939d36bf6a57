// dtrain-run's --mpi-args word splitting and its hostfile checks.
#include "launcher/shell_words.h"

#include <gtest/gtest.h>

#include "launcher/host_list.h"
#include "runtime/base/error.h"

namespace dtrain::launcher {
namespace {

using Words = std::vector<std::string>;

TEST(ShellWords, QuotesAreHonouredAsAShellWould) {
  EXPECT_EQ(split_shell_words("-x FOO='a b' --oversubscribe", "t"), (Words{"-x", "FOO=a b", "--oversubscribe"}));
  EXPECT_EQ(split_shell_words("  -x  \"BAR=c \\\"d\\\" $e\"  ", "t"), (Words{"-x", "BAR=c \"d\" $e"}));
  EXPECT_EQ(split_shell_words("a\\ b 'it'\"'\"'s' ''", "t"), (Words{"a b", "it's", ""}));
  EXPECT_EQ(split_shell_words("--mca btl self,tcp", "t"), (Words{"--mca", "btl", "self,tcp"}));
  EXPECT_TRUE(split_shell_words(" \t ", "t").empty());
}

TEST(ShellWords, UnterminatedQuotesAreUsageErrorsNamingTheOption) {
  for (const char* bad : {"-x FOO='a b", "-x \"a", "trailing\\"}) {
    try {
      split_shell_words(bad, "dtrain-run: --mpi-args");
      ADD_FAILURE() << bad << " accepted";
    } catch (const runtime::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("--mpi-args '") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

// Open MPI's hostfile names a host once per slot; "host:N" is -H's spelling. Both add up per host,
// in the order the hosts first appear; a malformed line names the file, the line and the formats.
TEST(HostList, HostfileMayNameAHostOncePerSlotOrAsHostColonN) {
  const std::vector<HostSlots> hosts =
      parse_hostfile("node1 slots=2\n# spare\nnode2\nnode1 slots=2\nnode2\nnode3:4\nnode1:1\n", "hosts.txt");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].host, "node1");
  EXPECT_EQ(hosts[0].slots, 5);
  EXPECT_EQ(hosts[1].host, "node2");
  EXPECT_EQ(hosts[1].slots, 2);
  EXPECT_EQ(hosts[2].host, "node3");
  EXPECT_EQ(hosts[2].slots, 4);
  for (const char* bad : {"node1:x\n", "node1 cpus=2\n", "no/de\n"}) {
    try {
      parse_hostfile(std::string("node0\n") + bad, "hosts.txt");
      ADD_FAILURE() << bad << " accepted";
    } catch (const runtime::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("hosts.txt:2: "), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace dtrain::launcher
