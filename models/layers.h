#pragma once
// The layers of the ResNet family as Modules over the CPU kernels in models/cpu/.
#include <memory>
#include <string>
#include <vector>

#include "models/batch_stats_reducer.h"
#include "models/cpu/conv2d.h"
#include "models/cpu/pooling.h"
#include "models/module.h"

namespace dtrain::models {

class Conv2d final : public Module {
 public:
  Conv2d(ParameterSet& params, const std::string& name, int in_channels, int out_channels, int kernel, int stride,
         int pad);
  const runtime::Tensor& forward(const runtime::Tensor& x, bool training) override;
  const runtime::Tensor& backward(const runtime::Tensor& dy) override;
  void initialize(ParameterSet& params, std::mt19937_64& rng) override;

  // Registers "<name>.weight" [out, in, kernel, kernel]; returns its id.
  static int declare(ParameterSet& params, const std::string& name, int in_channels, int out_channels, int kernel);
  // Kaiming normal, fan-out mode (torchvision's ResNet initialization).
  static void initialize_weight(ParameterSet& params, int weight, std::mt19937_64& rng);

 private:
  ParameterSet& params_;
  int weight_;
  Conv2dShape shape_;
  const runtime::Tensor* input_ = nullptr;
  runtime::Tensor output_, dx_;
  std::vector<float> columns_;
};

class BatchNorm2d final : public Module {
 public:
  BatchNorm2d(ParameterSet& params, const std::string& name, int channels);
  const runtime::Tensor& forward(const runtime::Tensor& x, bool training) override;
  const runtime::Tensor& backward(const runtime::Tensor& dy) override;
  void initialize(ParameterSet& params, std::mt19937_64& rng) override;
  // Synchronized BN (batch_stats_reducer.h): training forward and backward use the statistics of
  // the reducer's group. dgamma and dbeta stay this rank's share (the sums over its own batch), so
  // the gradient averaging over the ranks gives the group's gradient. Null: this batch alone.
  void set_batch_stats_reducer(BatchStatsReducer* reducer) { reducer_ = reducer; }

  struct Slots {
    int gamma, beta, running_mean, running_var;
  };
  // Registers "<name>.weight" (gamma), "<name>.bias" (beta) and the running statistics.
  static Slots declare(ParameterSet& params, const std::string& name, int channels);
  static Slots find(const ParameterSet& params, const std::string& name);
  // gamma 1 (0 with zero_gamma: a residual branch then starts as the identity, Goyal et al.),
  // beta 0, running mean 0, running variance 1.
  static void initialize_slots(ParameterSet& params, const Slots& slots, bool zero_gamma);

 private:
  ParameterSet& params_;
  int channels_;
  Slots slots_;
  const runtime::Tensor* input_ = nullptr;
  runtime::Tensor output_, dx_;
  std::vector<float> saved_mean_, saved_inv_std_;
  BatchStatsReducer* reducer_ = nullptr;
  int64_t group_count_ = 0;  // the values per channel the latest training forward normalized over
};

class ReLU final : public ParameterFreeModule {
 public:
  const runtime::Tensor& forward(const runtime::Tensor& x, bool training) override;
  const runtime::Tensor& backward(const runtime::Tensor& dy) override;

 private:
  runtime::Tensor output_, dx_;
};

class MaxPool2d final : public ParameterFreeModule {
 public:
  MaxPool2d(int window, int stride, int pad) : window_(window), stride_(stride), pad_(pad) {}
  const runtime::Tensor& forward(const runtime::Tensor& x, bool training) override;
  const runtime::Tensor& backward(const runtime::Tensor& dy) override;

 private:
  int window_, stride_, pad_;
  cpu::PoolShape shape_;
  runtime::Tensor output_, dx_;
  std::vector<int32_t> argmax_;
};

// [N, C, H, W] -> [N, C].
class GlobalAvgPool final : public ParameterFreeModule {
 public:
  const runtime::Tensor& forward(const runtime::Tensor& x, bool training) override;
  const runtime::Tensor& backward(const runtime::Tensor& dy) override;

 private:
  runtime::Shape input_shape_;
  runtime::Tensor output_, dx_;
};

class Linear final : public Module {
 public:
  Linear(ParameterSet& params, const std::string& name, int in_features, int out_features);
  const runtime::Tensor& forward(const runtime::Tensor& x, bool training) override;
  const runtime::Tensor& backward(const runtime::Tensor& dy) override;
  void initialize(ParameterSet& params, std::mt19937_64& rng) override;

  struct Slots {
    int weight, bias;
  };
  // Registers "<name>.weight" [out, in] and "<name>.bias" [out].
  static Slots declare(ParameterSet& params, const std::string& name, int in_features, int out_features);
  static Slots find(const ParameterSet& params, const std::string& name);
  // PyTorch's default: uniform(-1/sqrt(in), 1/sqrt(in)) for weight, then bias.
  static void initialize_slots(ParameterSet& params, const Slots& slots, std::mt19937_64& rng);

 private:
  ParameterSet& params_;
  int in_, out_;
  Slots slots_;
  const runtime::Tensor* input_ = nullptr;
  runtime::Tensor output_, dx_;
};

// Modules applied in order; backward in reverse.
class Sequential final : public Module {
 public:
  void add(std::unique_ptr<Module> module) { modules_.push_back(std::move(module)); }
  const runtime::Tensor& forward(const runtime::Tensor& x, bool training) override;
  const runtime::Tensor& backward(const runtime::Tensor& dy) override;
  void initialize(ParameterSet& params, std::mt19937_64& rng) override;
  bool empty() const { return modules_.empty(); }

 private:
  std::vector<std::unique_ptr<Module>> modules_;
};

}  // namespace dtrain::models
