// Cases for the gtest mains' exit status (tests/support/gtest_verdict.h), run by ctest with filters
// and DTRAIN_REQUIRE_GPU set or not (tests/runtime/CMakeLists.txt): the same source is linked with the
// single-process and with the multi-rank main.
#include <gtest/gtest.h>

TEST(Verdict, SkipsForWantOfAGpu) {
  GTEST_SKIP() << "no GPU visible to the CUDA runtime (this case always skips)";
}

TEST(Verdict, SkipsForAnotherReason) {
  GTEST_SKIP() << "needs 2 or more ranks (this case always skips)";
}

TEST(Verdict, Passes) {
  EXPECT_EQ(2 + 2, 4);
}
