// StepProfile: the file holds the median of each time over the profiled steps (odd and even step
// counts, against a float64 reference on fresh random times; the seed is printed), each gradient
// range's median ready time, and a step whose ranges differ from the first is an error naming
// the range.
#include "train/observe/step_profile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "runtime/base/error.h"

namespace dtrain::train {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The number after the `nth` occurrence of "key": in the file's text.
double value_of(const std::string& text, const std::string& key, int nth = 0) {
  size_t at = 0;
  for (int i = 0; i <= nth; ++i) {
    at = text.find("\"" + key + "\": ", at);
    EXPECT_NE(at, std::string::npos) << key;
    at += key.size() + 4;
  }
  return std::strtod(text.c_str() + at, nullptr);
}

TEST(StepProfile, MediansOverTheStepsAgainstAFloat64Reference) {
  const unsigned seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> seconds(1e-3, 0.2);
  for (int steps : {1, 4, 7}) {
    StepProfile profile;
    std::vector<double> forward, backward, optimizer, ready0, ready1;
    for (int s = 0; s < steps; ++s) {
      StepPhases p{seconds(rng), seconds(rng), seconds(rng), {{0, 7919, seconds(rng)}, {7920, 1, seconds(rng)}}};
      forward.push_back(p.forward);
      backward.push_back(p.backward);
      optimizer.push_back(p.optimizer);
      ready0.push_back(p.gradients[0].ready);
      ready1.push_back(p.gradients[1].ready);
      profile.add(p);
    }
    ProfileSource source{"resnet50", "bf16", "cpu", 256, 1, 1, 25 << 20, 41.5, 1 << 20, 3 << 20};
    const std::string text = profile.json(source);
    const double ms = 5.1e-5;  // written with 4 decimals of a millisecond
    EXPECT_NEAR(value_of(text, "forward_ms"), 1e3 * median(forward), ms) << "seed " << seed << ", " << steps;
    EXPECT_NEAR(value_of(text, "backward_ms"), 1e3 * median(backward), ms) << "seed " << seed;
    EXPECT_NEAR(value_of(text, "optimizer_ms"), 1e3 * median(optimizer), ms) << "seed " << seed;
    EXPECT_NEAR(value_of(text, "ready_ms", 0), 1e3 * median(ready0), ms) << "seed " << seed;
    EXPECT_NEAR(value_of(text, "ready_ms", 1), 1e3 * median(ready1), ms) << "seed " << seed;
    EXPECT_EQ(value_of(text, "elements", 0), 7919);
    EXPECT_EQ(value_of(text, "offset", 1), 7920);
    EXPECT_EQ(value_of(text, "steps_profiled"), steps);
    EXPECT_NEAR(value_of(text, "step_ms"), 41.5, 1e-9);
    EXPECT_EQ(value_of(text, "tail_bucket_bytes"), 1 << 20);
    EXPECT_EQ(value_of(text, "first_bucket_bytes"), 3 << 20);
    EXPECT_NE(text.find("\"format\": \"dtrain-step-profile\""), std::string::npos);
  }
}

TEST(StepProfile, AStepOfOtherRangesIsAnErrorNamingTheRange) {
  StepProfile profile;
  profile.add({1, 1, 1, {{0, 10, 0.1}, {10, 5, 0.2}}});
  try {
    profile.add({1, 1, 1, {{0, 10, 0.1}, {10, 6, 0.2}}});
    FAIL() << "a step of other ranges was taken";
  } catch (const runtime::Error& e) {
    EXPECT_NE(std::string(e.what()).find("gradient range 1 is [10, +6)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(StepProfile().json(ProfileSource{}), runtime::Error);
}

// Ranges out of buffer order (what the GPU engine reported when its batch norm gave gamma before
// beta: beta sits first, 64-element slots of 32 channels) or empty are an error naming the range.
TEST(StepProfile, RangesOutOfBufferOrderAreAnErrorNamingTheRange) {
  try {
    StepProfile().add({1, 1, 1, {{0, 160, 0.1}, {448, 32, 0.2}, {384, 32, 0.2}}});
    FAIL() << "overlapping ranges were taken";
  } catch (const runtime::Error& e) {
    EXPECT_NE(std::string(e.what()).find("gradient range 2 is [384, +32), before the end of the range reported "
                                         "before it at 480"),
              std::string::npos)
        << e.what();
  }
  try {
    StepProfile().add({1, 1, 1, {{0, 10, 0.1}, {16, 0, 0.2}}});
    FAIL() << "an empty range was taken";
  } catch (const runtime::Error& e) {
    EXPECT_NE(std::string(e.what()).find("gradient range 1 is [16, +0), of no elements"), std::string::npos)
        << e.what();
  }
  StepProfile in_order;
  in_order.add({1, 1, 1, {{0, 160, 0.1}, {384, 32, 0.2}, {448, 32, 0.2}}});  // gaps between slots are fine
  EXPECT_EQ(in_order.steps(), 1u);
}

}  // namespace
}  // namespace dtrain::train
