// The divergence guard's growth check and bound on loss sequences: a loss that grows
// exponentially (a learning rate far too high) stops the run long before it overflows; noise, a
// single spike after the first window and a loss trained close to 0 that rises again do not; a
// loss above max_loss stops it at once. Losses are random around their trend (seed printed).
#include "train/divergence_guard.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "runtime/base/error.h"
#include "tests/support/test_seed.h"

namespace dtrain::train {
namespace {

// Feeds losses[i] (the same on both ranks) as check i + 1; returns the 1-based check that threw
// and its message, or 0.
long first_trip(const DivergenceLimits& limits, const std::vector<double>& losses, std::string* message = nullptr) {
  DivergenceGuard guard(limits, true);
  for (size_t i = 0; i < losses.size(); ++i) {
    const StepPosition at{0, static_cast<long>(i), static_cast<long>(losses.size()), static_cast<long>(i + 1)};
    try {
      guard.check({losses[i], losses[i]}, at);
    } catch (const runtime::Error& e) {
      if (message != nullptr) *message = e.what();
      return static_cast<long>(i + 1);
    }
  }
  return 0;
}

// `count` losses around `level` (x 0.8 to 1.2).
std::vector<double> noisy(double level, size_t count, std::mt19937_64& random) {
  std::uniform_real_distribution<double> jitter(0.8, 1.2);
  std::vector<double> out;
  for (size_t i = 0; i < count; ++i) out.push_back(level * jitter(random));
  return out;
}

TEST(DivergenceGrowth, ExponentialGrowthStopsLongBeforeOverflow) {
  std::mt19937_64 random(test::random_seed());
  std::vector<double> losses = noisy(6.9, 3, random);
  // x10 per step, as --base-lr 1e6 did: 7, 70, 700, ... would reach 1e37 by step 40.
  for (int i = 1; i < 40; ++i) losses.push_back(6.9 * std::pow(10.0, i));
  std::string message;
  const long at = first_trip({}, losses, &message);
  EXPECT_GE(at, 4) << message;
  EXPECT_LE(at, 6) << "the growth went on too long without a word: " << message;
  EXPECT_NE(message.find("training diverged: loss "), std::string::npos) << message;
  EXPECT_NE(message.find("more than divergence_factor 100"), std::string::npos) << message;
  EXPECT_NE(message.find("at step " + std::to_string(at) + " (epoch 0, step " + std::to_string(at)), std::string::npos)
      << message;
}

TEST(DivergenceGrowth, NoiseAndASingleSpikeAfterTheFirstWindowDoNotStop) {
  std::mt19937_64 random(test::random_seed());
  std::vector<double> losses = noisy(2.3, 200, random);
  losses[50] = 2.3 * 500;  // one batch 500x worse: diluted by the window's other 9 checks
  EXPECT_EQ(first_trip({}, losses), 0);
}

TEST(DivergenceGrowth, ALossTrainedCloseToZeroMayRiseWithoutStopping) {
  std::mt19937_64 random(test::random_seed());
  std::vector<double> losses = noisy(2.3, 10, random);
  for (const double v : noisy(1e-4, 30, random)) losses.push_back(v);
  for (const double v : noisy(0.5, 30, random)) losses.push_back(v);  // 5000x, but below the start
  EXPECT_EQ(first_trip({}, losses), 0);
  losses.push_back(1e3);  // ...and well above it
  for (const double v : noisy(1e3, 10, random)) losses.push_back(v);
  EXPECT_GT(first_trip({}, losses), 70);
}

TEST(DivergenceGrowth, OffWhenTheFactorIsZero) {
  std::vector<double> losses;
  for (int i = 0; i < 30; ++i) losses.push_back(std::pow(10.0, i));
  DivergenceLimits off;
  off.factor = 0;
  EXPECT_EQ(first_trip(off, losses), 0);
}

TEST(DivergenceBound, ALossAboveMaxLossStopsAtOnce) {
  std::mt19937_64 random(test::random_seed());
  std::vector<double> losses = noisy(2.3, 20, random);
  losses.push_back(51);
  DivergenceLimits bounded;
  bounded.max_loss = 50;
  std::string message;
  EXPECT_EQ(first_trip(bounded, losses, &message), 21);
  EXPECT_NE(message.find("training diverged: loss 51 at step 21 (epoch 0, step 21 of 21) is above max_loss 50"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace dtrain::train
