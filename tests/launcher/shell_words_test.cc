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

TEST(HostList, HostfileNamingAHostTwiceIsAnErrorNamingTheHostAndLines) {
  try {
    parse_hostfile("node1 slots=2\n# spare\nnode2 slots=2\nnode1 slots=2\n", "hosts.txt");
    FAIL() << "accepted";
  } catch (const runtime::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("hosts.txt:4: host 'node1' is already named on line 1"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dtrain::launcher
