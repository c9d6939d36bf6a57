#pragma once
// The fused SGD update on the GPU over the flat parameter buffer, train::Sgd's semantics
// (train/engine/sgd.h, torch.optim.SGD with dampening 0) in one kernel: each element's parameter,
// gradient and momentum are read and written once. The bf16 fast path keeps fp32 master weights
// and momentum, takes bf16 gradients, and writes the bf16 weight copy the layers read in the same
// pass. The learning rate is a kernel argument, so the step needs nothing from the device; a
// captured step (step_graph.h) reads it from device memory instead, which set_device_lr writes
// before each replay (a graph replays its kernel arguments as captured).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/memory/dtype.h"

namespace dtrain::train::cuda {

// Where one weight-decay range ends (exclusive), its decay and its learning-rate scale (0: frozen,
// train::DecayRange's meaning); ranges tile [0, count) in order.
struct DecayRangeEnd {
  uint64_t end;
  float weight_decay;
  float lr_scale;
};

struct SgdStep {
  size_t count = 0;
  float* params = nullptr;                // fp32 master weights
  float* momentum = nullptr;              // fp32
  const DecayRangeEnd* ranges = nullptr;  // device array
  int range_count = 0;
  float lr = 0, mu = 0;
  bool nesterov = false;
  runtime::bfloat16* params_bf16 = nullptr;  // optional: the bf16 copy to refresh
  const float* lr_on_device = nullptr;       // non-null: the learning rate is read here, `lr` ignored
};

// G is float or runtime::bfloat16.
// *where = lr, queued on `stream` (a one-thread kernel: no host memory the copy would have to
// outlive, and no wait).
void set_device_lr(cudaStream_t stream, float* where, float lr);

template <typename G>
void sgd_update(cudaStream_t stream, const SgdStep& step, const G* grads);

}  // namespace dtrain::train::cuda
