#include "runtime/base/error.h"

#include <gtest/gtest.h>

#include <string>

#include "runtime/base/process_identity.h"

namespace dtrain::runtime {
namespace {

int throwing_check(int value) {
  DTRAIN_CHECK(value > 0) << "value was " << value;
  return value;
}

TEST(Error, CheckPassesWithoutEvaluatingTheMessage) {
  int evaluations = 0;
  auto count = [&] { return ++evaluations; };
  DTRAIN_CHECK(true) << count();
  EXPECT_EQ(evaluations, 0);
  EXPECT_EQ(throwing_check(3), 3);
}

TEST(Error, CheckFailureCarriesConditionMessageFileLineHostAndRanks) {
  set_process_identity(5, 8, 1);
  try {
    throwing_check(-2);
    FAIL() << "no exception";
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::kCondition);
    EXPECT_NE(text.find("check failed: value > 0"), std::string::npos) << text;
    EXPECT_NE(text.find("value was -2"), std::string::npos) << text;
    EXPECT_NE(text.find("error_test.cc:"), std::string::npos) << text;
    EXPECT_NE(text.find("host " + process_identity().host), std::string::npos) << text;
    EXPECT_NE(text.find("rank 5"), std::string::npos) << text;
    EXPECT_NE(text.find("local rank 1"), std::string::npos) << text;
    EXPECT_EQ(e.world_rank(), 5);
    EXPECT_EQ(e.local_rank(), 1);
    EXPECT_GT(e.line(), 0);
  }
  set_process_identity(-1, -1, -1);
}

TEST(Error, UsageCheckThrowsUsageErrorWithTheUserMessage) {
  try {
    DTRAIN_USAGE_CHECK(1 + 1 == 3) << "--batch must be positive";
    FAIL() << "no exception";
  } catch (const UsageError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    EXPECT_NE(std::string(e.what()).find("--batch must be positive"), std::string::npos);
    // The user sees the message, not our source location (kept in file() and line() for debug output).
    EXPECT_EQ(std::string(e.what()).find("error_test.cc"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("local rank"), std::string::npos) << e.what();
    EXPECT_GT(e.line(), 0);
  }
}

TEST(Error, MacrosAreSafeInUnbracedIfElse) {
  int branch = 0;
  const bool condition = false;
  if (condition)
    DTRAIN_CHECK(false) << "never";
  else
    branch = 2;
  EXPECT_EQ(branch, 2);
}

TEST(Error, LibraryMessagesStayOnOneLine) {
  const Error e(ErrorKind::kNccl, "ncclAllReduce(...)", "unhandled system error\nremote peer closed", "", __FILE__,
                __LINE__);
  const std::string text = e.what();
  EXPECT_EQ(text.find('\n'), std::string::npos) << text;
  EXPECT_NE(text.find("[NCCL] ncclAllReduce(...): unhandled system error remote peer closed"), std::string::npos)
      << text;
}

TEST(Error, KindNamesAreDistinct) {
  EXPECT_STREQ(error_kind_name(ErrorKind::kMpi), "MPI");
  EXPECT_STREQ(error_kind_name(ErrorKind::kCuda), "CUDA");
  EXPECT_STREQ(error_kind_name(ErrorKind::kCudnn), "cuDNN");
  EXPECT_STREQ(error_kind_name(ErrorKind::kCublas), "cuBLAS");
  EXPECT_STREQ(error_kind_name(ErrorKind::kNccl), "NCCL");
}

}  // namespace
}  // namespace dtrain::runtime
