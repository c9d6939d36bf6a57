// The ResNet family: exact parameter counts (torchvision's), the backward-ordered flat layout,
// deterministic initialization, and end-to-end gradients of a small network against finite
// differences.
#include "models/resnet.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "models/cpu/softmax_cross_entropy.h"
#include "runtime/base/error.h"
#include "tests/support/test_seed.h"

namespace dtrain::models {
namespace {

TEST(ResNet, ParameterCountsMatchTorchvision) {
  const std::pair<int, int64_t> expected[] = {
      {18, 11689512}, {34, 21797672}, {50, 25557032}, {101, 44549160}, {152, 60192808}};
  for (const auto& [depth, count] : expected) {
    ResNetConfig config;
    config.depth = depth;
    ResNet net(config);
    EXPECT_EQ(net.parameters().parameter_count(), count) << "ResNet-" << depth;
  }
}

// The plan alone (what the GPU ResNet uses) gives the CPU ResNet's layout and initial values, bit
// for bit, for every kind of config: both networks start from one description.
TEST(ResNetPlan, DeclaredParametersMatchTheCpuResNet) {
  std::vector<ResNetConfig> configs(6);
  configs[0].depth = 18;
  configs[1].depth = 50;
  configs[1].zero_init_residual = true;
  configs[2].blocks_per_stage = {1, 2};
  configs[2].bottleneck = false;
  configs[2].small_input = true;
  configs[2].num_classes = 10;
  configs[2].width = 8;
  configs[3] = configs[2];
  configs[3].batch_norm = false;
  configs[4].depth = 34;
  configs[4].in_channels = 1;
  configs[5].blocks_per_stage = {1, 1, 1};
  configs[5].width = 16;
  configs[5].zero_init_residual = true;
  const uint64_t seed = test::random_seed();
  for (size_t i = 0; i < configs.size(); ++i) {
    configs[i].seed = seed + i;
    ResNet cpu(configs[i]);
    ParameterSet planned;
    declare_parameters(cpu.plan(), planned);
    initialize_parameters(cpu.plan(), planned);
    ParameterSet& reference = cpu.parameters();
    ASSERT_EQ(planned.slots().size(), reference.slots().size()) << "config " << i;
    for (size_t k = 0; k < planned.slots().size(); ++k) {
      const ParamSlot& a = planned.slots()[k];
      const ParamSlot& b = reference.slots()[k];
      EXPECT_EQ(a.name, b.name) << "config " << i;
      EXPECT_EQ(a.shape, b.shape) << a.name;
      EXPECT_EQ(a.kind, b.kind) << a.name;
      EXPECT_EQ(a.offset, b.offset) << a.name;
    }
    ASSERT_EQ(planned.flat_size(), reference.flat_size());
    ASSERT_EQ(planned.state_count(), reference.state_count());
    EXPECT_TRUE(std::equal(planned.params_flat(), planned.params_flat() + planned.flat_size(), reference.params_flat()))
        << "config " << i << ": initial values differ";
    EXPECT_TRUE(std::equal(planned.state_flat(), planned.state_flat() + planned.state_count(), reference.state_flat()))
        << "config " << i << ": initial state differs";
    EXPECT_FALSE(planned.has_host_gradients()) << "declaring must not allocate host gradients";
  }
}

TEST(ResNet, FlatLayoutIsInBackwardOrder) {
  ResNet net(ResNetConfig{});
  const ParameterSet& p = net.parameters();
  const auto& slots = p.slots();
  EXPECT_EQ(slots.front().name, "conv1.weight");
  EXPECT_EQ(slots.front().offset + slots.front().numel, p.flat_size()) << "the first layer comes last";
  EXPECT_EQ(slots.back().name, "fc.bias");
  EXPECT_EQ(slots.back().offset, 0) << "the classifier comes first";
  // Offsets strictly decrease in registration order, each slot aligned and followed by the next
  // aligned offset: the gaps are only the alignment's.
  for (size_t i = 1; i < slots.size(); ++i) {
    const int64_t end = slots[i].offset + slots[i].numel;
    const int64_t a = ParameterSet::kSlotAlignment;
    EXPECT_EQ((end + a - 1) / a * a, slots[i - 1].offset) << slots[i].name;
    EXPECT_EQ(slots[i].offset % a, 0) << slots[i].name;
  }
  // Inside a block, the branch's parameters precede the shortcut's (backward visits the branch first).
  int64_t conv3 = -1, downsample = -1;
  for (const ParamSlot& s : slots) {
    if (s.name == "layer1.0.conv3.weight") conv3 = s.offset;
    if (s.name == "layer1.0.downsample.0.weight") downsample = s.offset;
  }
  EXPECT_LT(conv3, downsample);
}

TEST(ResNet, InitializationIsDeterministicPerSeedAndZeroInitWorks) {
  ResNetConfig config;
  config.depth = 18;
  config.seed = 7;
  ResNet a(config), b(config);
  config.seed = 8;
  config.zero_init_residual = true;
  ResNet c(config);
  const int64_t n = a.parameters().flat_size();
  EXPECT_TRUE(std::equal(a.parameters().params_flat(), a.parameters().params_flat() + n, b.parameters().params_flat()));
  EXPECT_FALSE(
      std::equal(a.parameters().params_flat(), a.parameters().params_flat() + n, c.parameters().params_flat()));
  // Kaiming fan-out: the std of conv1 (64 x 7 x 7 fan-out) is sqrt(2 / 3136).
  const ParamSlot& conv1 = a.parameters().slots().front();
  double sq = 0;
  for (int64_t i = 0; i < conv1.numel; ++i) sq += std::pow(a.parameters().params_flat()[conv1.offset + i], 2);
  EXPECT_NEAR(std::sqrt(sq / conv1.numel), std::sqrt(2.0 / 3136), 0.003);
  for (const ParamSlot& s : c.parameters().slots()) {
    if (s.name.find(".bn2.weight") != std::string::npos) {
      for (int64_t i = 0; i < s.numel; ++i) ASSERT_EQ(c.parameters().params_flat()[s.offset + i], 0.0f) << s.name;
    }
  }
}

TEST(ResNet, ImageNetForwardShape) {
  ResNet net(ResNetConfig{});
  runtime::Tensor x(runtime::DType::kF32, {1, 3, 64, 64});
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = dist(rng);
  const runtime::Tensor& y = net.forward(x, false);
  EXPECT_EQ(y.shape(), (runtime::Shape{1, 1000}));
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_TRUE(std::isfinite(y.data<float>()[i]));
}

TEST(ResNet, SmallNetworkGradientsMatchFiniteDifferences) {
  ResNetConfig config;
  config.small_input = true;
  config.blocks_per_stage = {1, 1};
  config.bottleneck = true;
  config.width = 4;
  config.num_classes = 3;
  config.in_channels = 1;
  config.seed = dtrain::test::random_seed();
  ResNet net(config);
  ParameterSet& p = net.parameters();

  runtime::Tensor x(runtime::DType::kF32, {2, 1, 8, 8});
  std::mt19937 rng(static_cast<unsigned>(config.seed));
  std::normal_distribution<float> dist;
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = dist(rng);
  const int32_t labels[2] = {0, 2};
  std::vector<float> dlogits(6);
  auto loss = [&](bool with_grad) {
    const runtime::Tensor& logits = net.forward(x, true);
    return cpu::softmax_cross_entropy(2, 3, logits.data<float>(), labels, 0.1, with_grad ? dlogits.data() : nullptr);
  };
  loss(true);
  runtime::Tensor dy(runtime::DType::kF32, {2, 3});
  std::copy(dlogits.begin(), dlogits.end(), dy.data<float>());
  net.backward(dy);
  std::vector<float> analytic(p.grads_flat(), p.grads_flat() + p.flat_size());

  // Per parameter tensor, a directional derivative along its own gradient g/|g|: finite
  // differences of the whole float32 loss must give |g|. A gradient routed to the wrong tensor,
  // scaled, or permuted fails it; float32 noise averages out over the tensor.
  int checked = 0;
  int missed = 0;
  std::string misses;
  for (const ParamSlot& slot : p.slots()) {
    double norm = 0;
    for (int64_t i = 0; i < slot.numel; ++i) norm += std::pow(analytic[size_t(slot.offset + i)], 2);
    norm = std::sqrt(norm);
    if (norm < 1e-2) continue;  // too little signal over float32 noise at these steps
    const std::vector<float> saved(p.params_flat() + slot.offset, p.params_flat() + slot.offset + slot.numel);
    auto shift = [&](double t) {
      for (int64_t i = 0; i < slot.numel; ++i) {
        p.params_flat()[slot.offset + i] =
            saved[size_t(i)] + static_cast<float>(t * analytic[size_t(slot.offset + i)] / norm);
      }
    };
    const double at_point = loss(false);
    auto one_sided = [&](double step) {
      shift(step);
      const double moved = loss(false);
      shift(0);
      return (moved - at_point) / step;
    };
    auto central = [&](double step) { return (one_sided(step) + one_sided(-step)) / 2; };
    // Small central steps, since the loss bends over larger ones (BN, ReLU kinks). A ReLU input
    // that lies closer to its kink than both steps spoils both; then the one-sided difference on the
    // side away from that kink still gives the derivative at this point, so a tensor passes if any
    // of the four agrees. A wrong, scaled or permuted gradient agrees with none of them.
    const double estimates[4] = {central(1e-3), central(4e-4), one_sided(1e-4), one_sided(-1e-4)};
    const double tolerance = 0.05 * norm + 1e-4;
    bool agrees = false;
    for (double estimate : estimates) agrees = agrees || std::fabs(estimate - norm) <= tolerance;
    if (!agrees) {
      misses += slot.name + " (|g| " + std::to_string(norm) + ", central " + std::to_string(estimates[0]) + " / " +
                std::to_string(estimates[1]) + ", one-sided " + std::to_string(estimates[2]) + " / " +
                std::to_string(estimates[3]) + ") ";
      ++missed;
    }
    ++checked;
  }
  EXPECT_GT(checked, static_cast<int>(p.slots().size()) / 2);
  // Kinks on both sides of the point can spoil one tensor's estimates in a network this small; a
  // wiring error spoils every tensor upstream of it.
  EXPECT_LE(missed, 2) << "of " << checked << " tensors: " << misses << "(seed " << config.seed << ")";
}

TEST(ResNet, RejectsUnknownDepths) {
  ResNetConfig config;
  config.depth = 42;
  EXPECT_THROW(ResNet net(config), runtime::UsageError);
}

}  // namespace
}  // namespace dtrain::models

namespace dtrain::models {
namespace {

// ResNet-50 end to end: forward and backward of a batch of 2 at 224x224 on CPU.
TEST(ResNet50, ForwardAndBackwardAt224) {
  ResNet net(ResNetConfig{});
  ASSERT_EQ(net.parameters().parameter_count(), 25557032);
  runtime::Tensor x(runtime::DType::kF32, {2, 3, 224, 224});
  std::mt19937 rng(dtrain::test::random_seed());
  std::normal_distribution<float> dist;
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = dist(rng);
  const runtime::Tensor& logits = net.forward(x, true);
  ASSERT_EQ(logits.shape(), (runtime::Shape{2, 1000}));
  const int32_t labels[2] = {3, 997};
  runtime::Tensor dlogits(runtime::DType::kF32, {2, 1000});
  const double loss = cpu::softmax_cross_entropy(2, 1000, logits.data<float>(), labels, 0.0, dlogits.data<float>());
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_NEAR(loss, std::log(1000.0), 3.0) << "an untrained network is near uniform";
  std::fill(net.parameters().grads_flat(), net.parameters().grads_flat() + net.parameters().flat_size(), NAN);
  const runtime::Tensor& dx = net.backward(dlogits);
  EXPECT_EQ(dx.shape(), x.shape());
  int64_t unwritten = 0;
  for (const ParamSlot& slot : net.parameters().slots()) {
    for (int64_t i = 0; i < slot.numel; ++i) unwritten += std::isnan(net.parameters().grads_flat()[slot.offset + i]);
  }
  EXPECT_EQ(unwritten, 0) << "backward writes every gradient";
}

}  // namespace
}  // namespace dtrain::models
