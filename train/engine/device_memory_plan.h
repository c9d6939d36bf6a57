#pragma once
// What the GPU training step (cuda/gpu_train_step.h) keeps in device memory for a ResNet plan, a
// batch and the numerics, computed without a GPU: every size is fixed by the plan, and the GPU
// ResNet (models/cuda/gpu_resnet.h) allocates and releases its tensors in a fixed order, which
// this file replays through the caching allocator's size classes. cuDNN's workspaces are the one
// thing it cannot know (the measured plans choose them at run time): the peak it predicts is
// without them, and the benchmark prints the measured peak beside it.
//
// Beside dtrain's, what PyTorch's autograd keeps for the same model in the same precision and
// layout (eager, channels_last, bf16 autocast): each convolution's input, each batch norm's input,
// each ReLU's output (which is the next convolution's input, so kept once), the max pool's int64
// indices; nothing for the residual add; parameters, gradients and momentum in fp32 and, in bf16,
// autocast's bf16 weight copies. The comparison says where the bytes differ, category by category.
#include <cstddef>
#include <string>
#include <vector>

#include "models/resnet_plan.h"

namespace dtrain::train {

struct DeviceMemoryPlanOptions {
  int batch = 0, height = 0, width = 0;
  bool bf16 = true;            // bf16 NHWC numerics (else fp32 NCHW)
  int input_slots = 3;         // GpuTrainStep::kInputSlots
  int accumulation_steps = 1;  // > 1: an fp32 gradient sum too
};

struct MemoryCategory {
  std::string name;
  size_t dtrain = 0;   // bytes, each allocation rounded as the caching allocator rounds it
  size_t pytorch = 0;  // bytes PyTorch's autograd keeps for the same (unrounded)
};

struct DeviceMemoryPlan {
  // Held for the whole run: parameters, gradients, optimizer and BN state, input slots.
  std::vector<MemoryCategory> persistent;
  // Kept by forward for backward (all of them alive at the end of forward).
  std::vector<MemoryCategory> saved;
  size_t forward_end = 0;     // persistent + saved + the step's loss gradient
  size_t predicted_peak = 0;  // the largest in use over forward and backward, without workspaces
  std::string peak_at;        // where backward reaches it ("end of forward" when it does not)
  size_t pytorch_total = 0;   // persistent + saved, PyTorch's categories
};

DeviceMemoryPlan device_memory_plan(const models::ResNetPlan& plan, const DeviceMemoryPlanOptions& options);
// One line: "device memory plan: parameters ... ; predicted peak X GB (+ cuDNN workspaces)".
std::string memory_plan_line(const DeviceMemoryPlan& plan);
// The table of every category, dtrain against PyTorch, in GB.
std::string memory_plan_table(const DeviceMemoryPlan& plan);

}  // namespace dtrain::train
