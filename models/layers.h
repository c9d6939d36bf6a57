#pragma once
// The layers of the ResNet family as Modules over the CPU kernels in models/cpu/.
#include <memory>
#include <string>
#include <vector>

#include "models/cpu/conv2d.h"
#include "models/cpu/pooling.h"
#include "models/module.h"

namespace dtrain::models {

class Conv2d final : public Module {
 public:
  Conv2d(ParameterSet& params, const std::string& name, int in_channels, int out_channels, int kernel, int stride,
         int pad);
  const core::Tensor& forward(const core::Tensor& x, bool training) override;
  const core::Tensor& backward(const core::Tensor& dy) override;
  // Kaiming normal, fan-out mode (torchvision's ResNet initialization).
  void initialize(ParameterSet& params, std::mt19937_64& rng) override;

 private:
  ParameterSet& params_;
  int weight_;
  cpu::Conv2dShape shape_;
  const core::Tensor* input_ = nullptr;
  core::Tensor output_, dx_;
  std::vector<float> columns_;
};

class BatchNorm2d final : public Module {
 public:
  BatchNorm2d(ParameterSet& params, const std::string& name, int channels);
  const core::Tensor& forward(const core::Tensor& x, bool training) override;
  const core::Tensor& backward(const core::Tensor& dy) override;
  void initialize(ParameterSet& params, std::mt19937_64& rng) override;
  // Zero gamma: the residual branch starts as identity (Goyal et al.).
  void zero_gamma() { zero_gamma_ = true; }

 private:
  ParameterSet& params_;
  int channels_;
  int gamma_, beta_, running_mean_, running_var_;
  bool zero_gamma_ = false;
  const core::Tensor* input_ = nullptr;
  core::Tensor output_, dx_;
  std::vector<float> saved_mean_, saved_inv_std_;
};

class ReLU final : public Module {
 public:
  const core::Tensor& forward(const core::Tensor& x, bool training) override;
  const core::Tensor& backward(const core::Tensor& dy) override;
  void initialize(ParameterSet&, std::mt19937_64&) override {}

 private:
  core::Tensor output_, dx_;
};

class MaxPool2d final : public Module {
 public:
  MaxPool2d(int window, int stride, int pad) : window_(window), stride_(stride), pad_(pad) {}
  const core::Tensor& forward(const core::Tensor& x, bool training) override;
  const core::Tensor& backward(const core::Tensor& dy) override;
  void initialize(ParameterSet&, std::mt19937_64&) override {}

 private:
  int window_, stride_, pad_;
  cpu::PoolShape shape_;
  core::Tensor output_, dx_;
  std::vector<int32_t> argmax_;
};

// [N, C, H, W] -> [N, C].
class GlobalAvgPool final : public Module {
 public:
  const core::Tensor& forward(const core::Tensor& x, bool training) override;
  const core::Tensor& backward(const core::Tensor& dy) override;
  void initialize(ParameterSet&, std::mt19937_64&) override {}

 private:
  core::Shape input_shape_;
  core::Tensor output_, dx_;
};

class Linear final : public Module {
 public:
  Linear(ParameterSet& params, const std::string& name, int in_features, int out_features);
  const core::Tensor& forward(const core::Tensor& x, bool training) override;
  const core::Tensor& backward(const core::Tensor& dy) override;
  // PyTorch's default: uniform(-1/sqrt(in), 1/sqrt(in)) for weight and bias.
  void initialize(ParameterSet& params, std::mt19937_64& rng) override;

 private:
  ParameterSet& params_;
  int in_, out_;
  int weight_, bias_;
  const core::Tensor* input_ = nullptr;
  core::Tensor output_, dx_;
};

// Modules applied in order; backward in reverse.
class Sequential final : public Module {
 public:
  void add(std::unique_ptr<Module> module) { modules_.push_back(std::move(module)); }
  const core::Tensor& forward(const core::Tensor& x, bool training) override;
  const core::Tensor& backward(const core::Tensor& dy) override;
  void initialize(ParameterSet& params, std::mt19937_64& rng) override;
  bool empty() const { return modules_.empty(); }

 private:
  std::vector<std::unique_ptr<Module>> modules_;
};

}  // namespace dtrain::models
