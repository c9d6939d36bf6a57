#pragma once
// A layer or a composition of layers. The CPU reference modules take host fp32 tensors, NCHW (or
// [N, features]); the GPU model (models/cuda/gpu_resnet.h) implements the same interface over
// device tensors in its context's type and layout.
//
// Contract: forward() returns the module's own output tensor, valid until its next forward; the
// module keeps a pointer to `x`, which the caller keeps alive until backward(). backward() takes
// dL/dy and returns dL/dx (owned by the module), and writes — not adds — the gradients of the
// module's parameters into the ParameterSet, each exactly once per step.
#include <random>

#include "models/parameter_set.h"
#include "runtime/memory/tensor.h"

namespace dtrain::models {

class Module {
 public:
  virtual ~Module() = default;
  virtual const runtime::Tensor& forward(const runtime::Tensor& x, bool training) = 0;
  virtual const runtime::Tensor& backward(const runtime::Tensor& dy) = 0;
  // Deterministic initialization from `rng`, after ParameterSet::finalize().
  virtual void initialize(ParameterSet& params, std::mt19937_64& rng) = 0;
};

// A module without parameters: initialization has nothing to do.
class ParameterFreeModule : public Module {
 public:
  void initialize(ParameterSet&, std::mt19937_64&) final {}
};

// Reuses `t` when it already has `shape`, so steady-state steps do not allocate.
runtime::Tensor& ensure_shape(runtime::Tensor& t, const runtime::Shape& shape);

}  // namespace dtrain::models
