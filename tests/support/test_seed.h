#pragma once
// Seeds for randomized tests: fresh each run, so runs cover new inputs, and printed, so a failure
// can be repeated: DTRAIN_TEST_SEED=<n> makes every random_seed() call of the run return n.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

namespace dtrain::test {

// Prints "[ SEED ] Suite.Test: seed N (repeat with DTRAIN_TEST_SEED=N)" and records it in the test's
// XML properties.
inline uint64_t random_seed() {
  uint64_t seed = 0;
  if (const char* fixed = std::getenv("DTRAIN_TEST_SEED"); fixed != nullptr && *fixed != '\0') {
    seed = std::strtoull(fixed, nullptr, 10);
  } else {
    std::random_device random;
    seed = (uint64_t{random()} << 32) ^ random();
  }
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = test ? std::string(test->test_suite_name()) + "." + test->name() : "(outside a test)";
  std::printf("[ SEED     ] %s: seed %llu (repeat with DTRAIN_TEST_SEED=%llu)\n", name.c_str(),
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  if (test != nullptr) ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

}  // namespace dtrain::test
