#include "train/engine/device_memory_plan.h"

#include <gtest/gtest.h>

#include <string>

#include "runtime/base/error.h"

namespace dtrain::train {
namespace {

// Two basic blocks of 4 and 8 channels on 8x8 images (small-input stem, no max pool), batch 4,
// bf16: every allocation is under 1 MiB, so each rounds to a multiple of 512 bytes. The numbers
// below are worked out by hand from the layers, in the comments.
models::ResNetPlan small_plan() {
  models::ResNetConfig c;
  c.blocks_per_stage = {1, 1};
  c.bottleneck = false;
  c.small_input = true;
  c.width = 4;
  c.num_classes = 10;
  return models::resnet_plan(c);
}

DeviceMemoryPlanOptions small_options() {
  DeviceMemoryPlanOptions o;
  o.batch = 4;
  o.height = o.width = 8;
  return o;
}

size_t category(const std::vector<MemoryCategory>& v, const std::string& prefix, bool pytorch = false) {
  for (const MemoryCategory& m : v)
    if (m.name.rfind(prefix, 0) == 0) return pytorch ? m.pytorch : m.dtrain;
  ADD_FAILURE() << "no category " << prefix;
  return 0;
}

TEST(DeviceMemoryPlan, SmallResNetByHand) {
  const DeviceMemoryPlan plan = device_memory_plan(small_plan(), small_options());
  // Parameters: stem 3x4x3x3 + BN 4 + 4; layer1.0 two 4x4x3x3 + 2 BN of 4 + 4; layer2.0 4x8x3x3,
  // 8x8x3x3, shortcut 4x8 + 3 BN of 8 + 8; fc 8x10 + 10: 1454 values in 20 slots, each starting
  // at a multiple of 64 elements (parameter_set.h): 2432 floats = 9728 bytes.
  EXPECT_EQ(category(plan.persistent, "parameters"), 9728u);
  EXPECT_EQ(category(plan.persistent, "gradients"), 9728u);
  EXPECT_EQ(category(plan.persistent, "momentum"), 9728u);
  EXPECT_EQ(category(plan.persistent, "weights (bf16"), 5120u);  // 4864
  EXPECT_EQ(category(plan.persistent, "parameters", true), 1454u * 4);
  // Running stats: 12 slots of 4 or 8 at 64-element steps (3072 bytes at most), then the mean and
  // inverse std of 6 BN layers, 512 each.
  EXPECT_EQ(category(plan.persistent, "batch norm"), 3072u + 12 * 512u);
  // 3 slots of 768 uint8 pixels (1024) and 16 bytes of labels (512); the normalized 1536.
  EXPECT_EQ(category(plan.persistent, "inputs"), 3 * (1024u + 512u) + 1536u);
  // Conv outputs: stem, layer1 x2 (4x8x8x4 bf16: 2048), layer2 conv1, shortcut, conv2 (1024).
  EXPECT_EQ(category(plan.saved, "saved: convolution"), 3 * 2048u + 3 * 1024u);
  // Norm outputs: the same less the shortcut's, released once added.
  EXPECT_EQ(category(plan.saved, "saved: norm"), 3 * 2048u + 2 * 1024u);
  EXPECT_EQ(category(plan.saved, "saved: ReLU masks"), 5 * 512u);
  // Pooled 64 and logits 80 bf16, the classifier's input gradient and the loss gradient: 512 each.
  EXPECT_EQ(category(plan.saved, "saved: head"), 4 * 512u);
  // 3 x 9728 + 5120 + 9216 + 6144 persistent, 9216 + 8192 + 2560 + 2048 saved.
  EXPECT_EQ(plan.forward_end, 71680u);
  // layer2.0's backward: the head's gradient 1024, dx 2048, d_skip 1024, the last norm's dx 1024,
  // then conv2's bf16 weight gradient (1152 bytes: 1536), while the others come and go: 6656 more.
  EXPECT_EQ(plan.predicted_peak, 71680u + 6656u);
  EXPECT_EQ(plan.peak_at, "backward of layer2.0");
  // PyTorch, unrounded and without gaps: 3 x 5816 + 2908 + BN 288 + 288 + input 1536 + convs 9216
  // + ReLU outputs 8192 + pooled and logits 144.
  EXPECT_EQ(category(plan.saved, "saved: ReLU masks", true), 0u);
  EXPECT_EQ(plan.pytorch_total, 40020u);
}

TEST(DeviceMemoryPlan, LineNamesTheCategoriesAndThePeak) {
  const std::string line = memory_plan_line(device_memory_plan(small_plan(), small_options()));
  for (const char* part : {"device memory plan:", "parameters (fp32 master)", "momentum", "saved for backward",
                           "ReLU masks", "predicted peak", "backward of layer2.0", "cuDNN workspaces", "PyTorch"})
    EXPECT_NE(line.find(part), std::string::npos) << part << " missing from: " << line;
}

TEST(DeviceMemoryPlan, Fp32HasNoBf16CopyAndDoubleActivations) {
  DeviceMemoryPlanOptions o = small_options();
  o.bf16 = false;
  const DeviceMemoryPlan plan = device_memory_plan(small_plan(), o);
  for (const MemoryCategory& m : plan.persistent) EXPECT_EQ(m.name.find("bf16"), std::string::npos) << m.name;
  EXPECT_EQ(category(plan.saved, "saved: convolution"), 3 * 4096u + 3 * 2048u);
}

TEST(DeviceMemoryPlan, RejectsAnEmptyBatch) {
  DeviceMemoryPlanOptions o = small_options();
  o.batch = 0;
  try {
    device_memory_plan(small_plan(), o);
    FAIL() << "no exception";
  } catch (const runtime::Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dtrain::train
