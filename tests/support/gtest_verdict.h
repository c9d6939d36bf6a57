// The exit status of a gtest binary, shared by the single-process and the multi-rank mains.
//
// - Any failed test: 1.
// - DTRAIN_REQUIRE_GPU=1 (set on GPU machines): a test skipped for want of a GPU or of CUDA (its
//   skip message names "GPU" or "CUDA", as every GPU test's does) is a failure, listed by name, so
//   a driver too old for the toolkit cannot pass the GPU suites by skipping them. Skips for other
//   reasons (a rank count, a missing optional dataset) stay skips.
// - Every test that ran was skipped: 77, registered as ctest's SKIP_RETURN_CODE, so ctest reports
//   the suite "Skipped" rather than "Passed".
// - Otherwise 0.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace dtrain::test {

inline constexpr int kSkipExitCode = 77;

inline bool gpu_required() {
  const char* value = std::getenv("DTRAIN_REQUIRE_GPU");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

// The first skip message of a skipped test, or "" when it was not skipped.
inline std::string skip_message(const testing::TestResult& result) {
  for (int i = 0; i < result.total_part_count(); ++i) {
    const testing::TestPartResult& part = result.GetTestPartResult(i);
    if (part.skipped()) return part.message() ? part.message() : "";
  }
  return "";
}

// Counts the skips that DTRAIN_REQUIRE_GPU=1 turns into failures, printing each.
inline int skips_failed_for_want_of_gpu(const char* rank_prefix) {
  if (!gpu_required()) return 0;
  int count = 0;
  const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const testing::TestSuite& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      const testing::TestInfo& test = *suite.GetTestInfo(t);
      if (!test.should_run() || !test.result()->Skipped()) continue;
      const std::string why = skip_message(*test.result());
      if (why.find("GPU") == std::string::npos && why.find("CUDA") == std::string::npos) continue;
      std::fprintf(stderr, "%sFAILED %s.%s: skipped under DTRAIN_REQUIRE_GPU=1: %s\n", rank_prefix, suite.name(),
                   test.name(), why.c_str());
      ++count;
    }
  }
  return count;
}

// Runs every test and returns 0, 1 or 77 as described above; rank_prefix starts the lines it prints.
inline int run_all_tests_with_verdict(const char* rank_prefix = "") {
  const int run_status = RUN_ALL_TESTS();
  const int gpu_failures = skips_failed_for_want_of_gpu(rank_prefix);
  if (run_status != 0 || gpu_failures > 0) return 1;
  const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  if (unit.test_to_run_count() > 0 && unit.skipped_test_count() == unit.test_to_run_count()) {
    return kSkipExitCode;
  }
  return 0;
}

}  // namespace dtrain::test
