#pragma once
// SGD with momentum and weight decay, PyTorch's torch.optim.SGD semantics (dampening 0):
//   g   = grad + wd * p          (wd = 0 on ranges excluded from decay: BN and biases, if asked)
//   buf = momentum * buf + g     (buf starts at 0, so the first step stores g)
//   d   = nesterov ? g + momentum * buf : buf
//   p  -= lr * d
// One fused pass over the flat parameter buffer: parameters, gradients and momentum are read and
// written once per step.
#include <cstddef>
#include <string>
#include <vector>

#include "models/parameter_set.h"
#include "models/resnet_plan.h"

namespace dtrain::train {

struct SgdOptions {
  double momentum = 0.9;
  double weight_decay = 1e-4;
  bool nesterov = false;
};

// A run of consecutive flat elements sharing one weight decay and one learning-rate scale (the
// step's lr times lr_scale; 0 freezes the run: neither its parameters nor their momentum change,
// as torch.optim.SGD leaves a parameter without a gradient).
struct DecayRange {
  size_t begin = 0;
  size_t end = 0;
  float weight_decay = 0;
  float lr_scale = 1;
};

// The decay ranges of a model's flat buffer, in offset order, runs of equal decay and scale
// merged: weight decay on every parameter, or (exempt_norm_and_bias) only on conv and linear
// weights. Fine-tuning: every parameter outside the layer `classifier` takes lr_scale
// backbone_lr_scale.
std::vector<DecayRange> decay_ranges(const models::ParameterSet& params, float weight_decay, bool exempt_norm_and_bias,
                                     float backbone_lr_scale = 1,
                                     const std::string& classifier = models::kClassifierName);

class Sgd {
 public:
  // ranges must tile [0, count) in order.
  Sgd(size_t count, std::vector<DecayRange> ranges, SgdOptions options);

  void step(float* params, const float* grads, float lr);
  // New ranges (a fine-tuning run unfreezing its backbone), tiling the same buffer.
  void set_ranges(std::vector<DecayRange> ranges);
  const std::vector<float>& momentum_buffer() const { return momentum_; }
  std::vector<float>& momentum_buffer() { return momentum_; }

 private:
  std::vector<DecayRange> ranges_;
  SgdOptions options_;
  std::vector<float> momentum_;
};

}  // namespace dtrain::train
