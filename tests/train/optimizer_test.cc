// SGD against a float64 re-implementation of torch.optim.SGD, and the linear-scaling schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "models/resnet.h"
#include "runtime/base/error.h"
#include "tests/support/test_seed.h"
#include "train/engine/lr_schedule.h"
#include "train/engine/sgd.h"

namespace dtrain::train {
namespace {

TEST(Sgd, MatchesFloat64ReferenceWithDecayExclusionsAndNesterov) {
  std::mt19937 rng(dtrain::test::random_seed());
  std::normal_distribution<float> dist;
  const size_t n = 1003;
  for (bool nesterov : {false, true}) {
    // The learning-rate scales of fine-tuning: the schedule's, a backbone's 0.1, frozen (0).
    const std::vector<DecayRange> ranges = {{0, 300, 1e-4f, 1.0f},
                                            {300, 400, 1e-4f, 0.1f},
                                            {400, 401, 0.0f, 1.0f},
                                            {401, 700, 1e-4f, 0.0f},
                                            {700, n, 1e-4f}};
    const auto scale_of = [](size_t i) { return i < 300 ? 1.0 : i < 400 ? 0.1 : i < 401 ? 1.0 : i < 700 ? 0.0 : 1.0; };
    Sgd sgd(n, ranges, SgdOptions{0.9, 1e-4, nesterov});
    std::vector<float> p(n), g(n);
    for (float& v : p) v = dist(rng);
    const std::vector<float> initial = p;
    std::vector<double> ref_p(p.begin(), p.end()), ref_buf(n, 0.0);
    for (int step = 0; step < 5; ++step) {
      for (float& v : g) v = dist(rng);
      const float lr = 0.1f * (step + 1);
      sgd.step(p.data(), g.data(), lr);
      for (size_t i = 0; i < n; ++i) {
        if (scale_of(i) == 0) continue;  // frozen, as torch.optim.SGD skips a parameter without gradient
        const double wd = (i == 400) ? 0.0 : 1e-4;
        const double grad = g[i] + wd * ref_p[i];
        ref_buf[i] = 0.9 * ref_buf[i] + grad;
        ref_p[i] -= lr * scale_of(i) * (nesterov ? grad + 0.9 * ref_buf[i] : ref_buf[i]);
      }
    }
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(p[i], ref_p[i], 1e-5 * (1 + std::fabs(ref_p[i]))) << i;
    for (size_t i = 401; i < 700; ++i) {
      ASSERT_EQ(p[i], initial[i]) << "frozen element " << i << " moved";
      ASSERT_EQ(sgd.momentum_buffer()[i], 0.0f) << "frozen element " << i << " gathered momentum";
    }
  }
}

TEST(Sgd, RejectsBadOptionsAndRanges) {
  EXPECT_THROW(Sgd(10, {{0, 5, 0}}, SgdOptions{}), runtime::Error);
  EXPECT_THROW(Sgd(10, {{0, 10, 0}}, SgdOptions{1.5, 0, false}), runtime::UsageError);
  EXPECT_THROW(Sgd(10, {{0, 10, 0}}, SgdOptions{0.0, 0, true}), runtime::UsageError);
}

// The decay ranges of a real layout (slots aligned, with gaps between them) tile its flat buffer,
// with every slot's elements under its own decay, also when norms and biases are exempt.
TEST(Sgd, DecayRangesTileAnAlignedLayout) {
  models::ResNetConfig config;
  config.depth = 18;
  config.num_classes = 100;  // a classifier whose size is not a multiple of the alignment
  models::ResNet net(config);
  const models::ParameterSet& p = net.parameters();
  ASSERT_GT(p.flat_size(), p.parameter_count()) << "the layout has alignment gaps";
  for (bool exempt : {false, true}) {
    const std::vector<DecayRange> ranges = decay_ranges(p, 1e-4f, exempt);
    EXPECT_NO_THROW(Sgd(static_cast<size_t>(p.flat_size()), ranges, SgdOptions{0.9, 1e-4, false}));
    for (const models::ParamSlot& slot : p.slots()) {
      const bool free = exempt && slot.kind != models::ParamKind::kWeight;
      for (const DecayRange& r : ranges) {
        if (r.begin <= static_cast<size_t>(slot.offset) && static_cast<size_t>(slot.offset) < r.end) {
          EXPECT_GE(r.end, static_cast<size_t>(slot.offset + slot.numel)) << slot.name;
          EXPECT_EQ(r.weight_decay, free ? 0.0f : 1e-4f) << slot.name;
        }
      }
    }
  }
}

// Fine-tuning: the classifier ("fc.") keeps the schedule's rate, every other slot takes the
// backbone's scale; set_ranges swaps them (unfreezing) on the same buffer.
TEST(Sgd, BackboneScaleCoversEverySlotButTheClassifier) {
  models::ResNetConfig config;
  config.depth = 18;
  config.num_classes = 10;
  models::ResNet net(config);
  const models::ParameterSet& p = net.parameters();
  for (float backbone : {0.0f, 0.1f}) {
    const std::vector<DecayRange> ranges = decay_ranges(p, 1e-4f, true, backbone);
    for (const models::ParamSlot& slot : p.slots()) {
      const bool head = slot.name == "fc.weight" || slot.name == "fc.bias";
      for (const DecayRange& r : ranges) {
        if (r.begin <= static_cast<size_t>(slot.offset) && static_cast<size_t>(slot.offset) < r.end) {
          EXPECT_GE(r.end, static_cast<size_t>(slot.offset + slot.numel)) << slot.name;
          EXPECT_EQ(r.lr_scale, head ? 1.0f : backbone) << slot.name;
        }
      }
    }
  }
  Sgd sgd(static_cast<size_t>(p.flat_size()), decay_ranges(p, 1e-4f, false, 0.0f), SgdOptions{});
  EXPECT_NO_THROW(sgd.set_ranges(decay_ranges(p, 1e-4f, false, 1.0f)));
  EXPECT_THROW(sgd.set_ranges({{0, 5, 0}}), runtime::Error);
}

TEST(LinearScalingSchedule, ScalesWarmsUpAndDecays) {
  LrScheduleOptions o;
  o.base_lr = 0.1;
  o.global_batch = 8192;  // Goyal et al.: 8k images, lr 3.2
  o.warmup_epochs = 5;
  const long per_epoch = 100;
  LinearScalingSchedule s(o, per_epoch);
  EXPECT_DOUBLE_EQ(s.peak_lr(), 3.2);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.0);
  EXPECT_NEAR(s.lr_at(250), 1.6, 1e-12) << "half-way through warm-up";
  EXPECT_LT(s.lr_at(249), s.lr_at(250)) << "updated every iteration";
  EXPECT_DOUBLE_EQ(s.lr_at(500), 3.2);
  EXPECT_DOUBLE_EQ(s.lr_at(2999), 3.2);
  EXPECT_NEAR(s.lr_at(3000), 0.32, 1e-12);
  EXPECT_NEAR(s.lr_at(6000), 0.032, 1e-12);
  EXPECT_NEAR(s.lr_at(8000), 0.0032, 1e-12);
  EXPECT_NE(s.describe(32, 256).find("global batch 8192, scaled lr 3.2"), std::string::npos) << s.describe(32, 256);

  o.decay = DecayKind::kCosine;
  o.total_epochs = 15;
  LinearScalingSchedule c(o, per_epoch);
  EXPECT_DOUBLE_EQ(c.lr_at(500), 3.2);
  EXPECT_NEAR(c.lr_at(1000), 1.6, 1e-9) << "half-way through the cosine";
  EXPECT_NEAR(c.lr_at(1500), 0.0, 1e-12);
}

TEST(LinearScalingSchedule, RejectsBadOptions) {
  LrScheduleOptions o;
  o.base_lr = -1;
  EXPECT_THROW(LinearScalingSchedule(o, 10), runtime::UsageError);
  o = LrScheduleOptions{};
  o.milestones = {60, 30};
  EXPECT_THROW(LinearScalingSchedule(o, 10), runtime::UsageError);
  EXPECT_THROW(LinearScalingSchedule(LrScheduleOptions{}, 0), runtime::UsageError);
}

}  // namespace
}  // namespace dtrain::train
