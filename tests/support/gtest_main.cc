// gtest main for single-process tests: the usual report, and an exit status that tells ctest a
// suite whose every test skipped apart from one that passed (tests/support/gtest_verdict.h).
#include "tests/support/gtest_verdict.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const int status = dtrain::test::run_all_tests_with_verdict();
  if (status == dtrain::test::kSkipExitCode) {
    std::printf("every test skipped: exit %d, which ctest reports as Skipped\n", status);
  }
  return status;
}
