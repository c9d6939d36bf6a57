// A full ResNet-50 training step (forward, loss, backward) on the GPU against the CPU reference
// model from the same seed and the same batch of 4.
//
// fp32 NCHW with TF32 off: the loss, the logits, every parameter's gradient norm and the BN running
// statistics agree. Backward through a freshly initialized ResNet-50 on 4 images is sensitive:
// nudging every input pixel by one ulp moves some per-parameter gradient norms on the CPU by ~5e-3
// (ReLU masks and max-pool choices flip on near-ties). So the per-parameter bound is the larger of
// 1e-3 and 4x that sensitivity, measured in the same test on the same batch (the total norm: the
// larger of 1e-3 and 4x its sensitivity).
//
// bf16 NHWC: bf16 rounding is far above that sensitivity, so per-parameter norms are not compared;
// the loss, the logits (relative RMS error), the total gradient norm and the running statistics
// must agree within bf16 precision. A layout or weight-copy mistake moves the logits by ~100%.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "models/cpu/softmax_cross_entropy.h"
#include "models/resnet.h"
#include "runtime/rank/gpu_binding.h"

#if DTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "models/cuda/gpu_resnet.h"
#include "models/cuda/op_timer.h"
#include "models/cuda/softmax_cross_entropy.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/stream.h"
#include "tests/support/device_vector.h"
#include "tests/support/test_seed.h"
#endif

namespace dtrain::models {
namespace {

#if DTRAIN_WITH_CUDA
constexpr int kBatch = 4, kSide = 224, kClasses = 1000;

struct StepOutcome {
  double loss = 0;
  std::vector<float> logits;       // [batch, classes]
  std::vector<double> grad_norms;  // per parameter slot
  std::vector<float> state;        // BN running statistics after the step
};

double norm(const float* v, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(v[i]) * v[i];
  return std::sqrt(s);
}

std::vector<double> slot_norms(ParameterSet& p) {
  std::vector<double> out;
  for (int id = 0; id < static_cast<int>(p.slots().size()); ++id) out.push_back(norm(p.grad(id), p.slot(id).numel));
  return out;
}

// nudge: every pixel one ulp up (the sensitivity probe).
StepOutcome cpu_step(const ResNetConfig& config, const std::vector<float>& image, const std::vector<int32_t>& labels,
                     bool nudge = false) {
  ResNet model(config);
  runtime::Tensor x(runtime::DType::kF32, {kBatch, 3, kSide, kSide});
  for (size_t i = 0; i < image.size(); ++i) x.data<float>()[i] = nudge ? std::nextafter(image[i], 1e30f) : image[i];
  const runtime::Tensor& logits = model.forward(x, true);
  runtime::Tensor dlogits(runtime::DType::kF32, logits.shape());
  StepOutcome out;
  out.loss =
      cpu::softmax_cross_entropy(kBatch, kClasses, logits.data<float>(), labels.data(), 0.0, dlogits.data<float>());
  out.logits.assign(logits.data<float>(), logits.data<float>() + logits.numel());
  model.backward(dlogits);
  out.grad_norms = slot_norms(model.parameters());
  out.state.assign(model.parameters().state_flat(), model.parameters().state_flat() + model.parameters().state_count());
  return out;
}

// NCHW fp32 image -> the context's element type and layout.
std::vector<unsigned char> encode(const std::vector<float>& nchw, bool bf16) {
  if (!bf16)
    return {reinterpret_cast<const unsigned char*>(nchw.data()),
            reinterpret_cast<const unsigned char*>(nchw.data() + nchw.size())};
  std::vector<unsigned char> out(nchw.size() * 2);
  const size_t s = size_t(kSide) * kSide;
  for (size_t i = 0; i < nchw.size(); ++i) {
    const size_t n = i / (3 * s), c = i / s % 3, p = i % s;
    const runtime::bfloat16 b = runtime::to_bfloat16(nchw[i]);
    std::memcpy(&out[2 * ((n * s + p) * 3 + c)], &b, 2);
  }
  return out;
}

template <typename T>
std::vector<float> to_floats(const std::vector<unsigned char>& raw) {
  std::vector<float> out(raw.size() / sizeof(T));
  for (size_t i = 0; i < out.size(); ++i) {
    T v;
    std::memcpy(&v, &raw[i * sizeof(T)], sizeof(T));
    if constexpr (std::is_same_v<T, float>) {
      out[i] = v;
    } else {
      out[i] = runtime::to_float(v);
    }
  }
  return out;
}

StepOutcome gpu_step(const ResNetConfig& config, cuda::ConvNumerics numerics, const std::vector<float>& image,
                     const std::vector<int32_t>& labels) {
  cuda::GpuContext context(0, numerics, /*allow_tf32=*/false);
  cuda::GpuResNet model(config, context);
  const bool bf16 = context.bf16();
  runtime::Tensor x(context.activation_dtype(), {kBatch, 3, kSide, kSide}, runtime::MemoryKind::kDevice);
  const std::vector<unsigned char> encoded = encode(image, bf16);
  DTRAIN_CUDA_CHECK(cudaMemcpy(x.raw(), encoded.data(), encoded.size(), cudaMemcpyHostToDevice));
  const runtime::Tensor& logits = model.forward(x, true);
  runtime::Tensor dlogits(context.activation_dtype(), logits.shape(), runtime::MemoryKind::kDevice);
  test::DeviceVector<int32_t> labels_d(labels);
  test::DeviceVector<float> loss(1);
  test::DeviceVector<int32_t> hits(1);
  if (bf16) {
    cuda::softmax_cross_entropy(context.stream(), kBatch, kClasses, logits.data<runtime::bfloat16>(), labels_d.get(),
                                0.0f, dlogits.data<runtime::bfloat16>(), {loss.get(), hits.get()});
  } else {
    cuda::softmax_cross_entropy(context.stream(), kBatch, kClasses, logits.data<float>(), labels_d.get(), 0.0f,
                                dlogits.data<float>(), {loss.get(), hits.get()});
  }
  model.backward(dlogits);
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
  StepOutcome out;
  out.loss = loss.to_host()[0];
  std::vector<unsigned char> raw(logits.bytes());
  DTRAIN_CUDA_CHECK(cudaMemcpy(raw.data(), logits.raw(), raw.size(), cudaMemcpyDeviceToHost));
  out.logits = bf16 ? to_floats<runtime::bfloat16>(raw) : to_floats<float>(raw);
  // The GPU path keeps gradients on the device: no host gradient buffer until one is asked for.
  EXPECT_FALSE(model.parameters().has_host_gradients());
  model.sync_to_host(/*gradients=*/true);
  ParameterSet& p = model.parameters();
  out.grad_norms = slot_norms(p);
  out.state.assign(p.state_flat(), p.state_flat() + p.state_count());
  return out;
}

double relative(double got, double want) {
  return std::fabs(got - want) / std::max(std::fabs(want), 1e-30);
}

double total_norm(const StepOutcome& o) {
  double s = 0;
  for (double n : o.grad_norms) s += n * n;
  return std::sqrt(s);
}

// Largest relative difference of the per-parameter gradient norms; *at gets its index.
double worst_norm_difference(const StepOutcome& a, const StepOutcome& b, size_t* at) {
  double worst = 0;
  for (size_t id = 0; id < b.grad_norms.size(); ++id) {
    const double r = relative(a.grad_norms[id], b.grad_norms[id]);
    if (r > worst) worst = r, *at = id;
  }
  return worst;
}

// RMS of (got - want) over the RMS of want.
double relative_rms(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    ref += double(want[i]) * want[i];
  }
  return std::sqrt(diff / std::max(ref, 1e-300));
}

void expect_loss_and_logits(const StepOutcome& gpu, const StepOutcome& cpu, double loss_bound, double logits_bound) {
  std::printf("  loss gpu %.7f cpu %.7f (relative %.2e, bound %.0e)\n", gpu.loss, cpu.loss,
              relative(gpu.loss, cpu.loss), loss_bound);
  EXPECT_LE(relative(gpu.loss, cpu.loss), loss_bound);
  const double logits = relative_rms(gpu.logits, cpu.logits);
  std::printf("  logits: relative RMS difference %.2e (bound %.0e)\n", logits, logits_bound);
  EXPECT_LE(logits, logits_bound);
}

class GpuResNetTest : public testing::Test {
 protected:
  void SetUp() override {
    if (runtime::detail::runtime_visible_gpus().empty()) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
    DTRAIN_CUDA_CHECK(cudaSetDevice(0));
    std::mt19937_64 rng(dtrain::test::random_seed());
    std::normal_distribution<float> pixel(0.0f, 1.0f);
    image_.resize(size_t(kBatch) * 3 * kSide * kSide);
    for (float& v : image_) v = pixel(rng);
    for (int i = 0; i < kBatch; ++i) labels_.push_back(static_cast<int32_t>(rng() % kClasses));
    config_.depth = 50;
    config_.num_classes = kClasses;
    config_.seed = rng();
  }
  ResNetConfig config_;
  std::vector<float> image_;
  std::vector<int32_t> labels_;
};

TEST_F(GpuResNetTest, Fp32StepMatchesCpu) {
  const StepOutcome cpu = cpu_step(config_, image_, labels_);
  const StepOutcome nudged = cpu_step(config_, image_, labels_, /*nudge=*/true);
  const StepOutcome gpu = gpu_step(config_, cuda::ConvNumerics::kFp32Nchw, image_, labels_);
  ResNet layout(config_);
  const std::vector<ParamSlot>& slots = layout.parameters().slots();

  size_t at = 0;
  const double sensitivity = worst_norm_difference(nudged, cpu, &at);
  std::printf("  CPU sensitivity: a one-ulp input nudge moves a gradient norm by up to %.2e (%s), the total by %.2e\n",
              sensitivity, slots[at].name.c_str(), relative(total_norm(nudged), total_norm(cpu)));
  const double norm_bound = std::max(1e-3, 4 * sensitivity);
  // One nudge is one sample of the total's sensitivity (3.6e-5 to 4.0e-4 seen); the GPU's total
  // differed by 3.9e-5 to 4.5e-4 over five H200 runs. Hence the 1e-3 floor.
  const double total_bound = std::max(1e-3, 4 * relative(total_norm(nudged), total_norm(cpu)));

  expect_loss_and_logits(gpu, cpu, 1e-4, 1e-4);
  const double worst = worst_norm_difference(gpu, cpu, &at);
  std::printf("  gradient norms of %zu parameters: worst relative difference %.2e at %s (bound %.1e)\n", slots.size(),
              worst, slots[at].name.c_str(), norm_bound);
  for (size_t id = 0; id < slots.size(); ++id) {
    EXPECT_LE(relative(gpu.grad_norms[id], cpu.grad_norms[id]), norm_bound)
        << slots[id].name << ": gradient norm " << gpu.grad_norms[id] << " on the GPU, " << cpu.grad_norms[id]
        << " on the CPU";
  }
  const double total = relative(total_norm(gpu), total_norm(cpu));
  std::printf("  total gradient norm gpu %.6f cpu %.6f (relative %.2e, bound %.1e)\n", total_norm(gpu), total_norm(cpu),
              total, total_bound);
  EXPECT_LE(total, total_bound);
  double state = 0;
  for (size_t i = 0; i < cpu.state.size(); ++i)
    state = std::max(state, std::fabs(double(gpu.state[i]) - cpu.state[i]) / (std::fabs(cpu.state[i]) + 1e-2));
  std::printf("  BN running statistics: worst relative difference %.2e (bound %.1e)\n", state, norm_bound);
  EXPECT_LE(state, norm_bound);
}

TEST_F(GpuResNetTest, Bf16StepMatchesCpuWithinBf16Precision) {
  const StepOutcome cpu = cpu_step(config_, image_, labels_);
  const StepOutcome gpu = gpu_step(config_, cuda::ConvNumerics::kBf16Nhwc, image_, labels_);
  // Measured on an H200 in three runs: loss 0.2-1.0%, total norm 0.4-3.4%, logits 9.8-10.1% RMS
  // (two runs), running statistics 1.2%. A transposed filter or a stale bf16 weight copy moves the
  // logits by ~100%.
  expect_loss_and_logits(gpu, cpu, 5e-2, 2.5e-1);
  const double total = relative(total_norm(gpu), total_norm(cpu));
  std::printf("  total gradient norm gpu %.6f cpu %.6f (relative %.2e, bound 1e-01)\n", total_norm(gpu),
              total_norm(cpu), total);
  EXPECT_LE(total, 1e-1);
  const double state = relative_rms(gpu.state, cpu.state);
  std::printf("  BN running statistics: relative RMS difference %.2e (bound 5e-02)\n", state);
  EXPECT_LE(state, 5e-2);
}

// The op timer (models/cuda/op_timer.h) sees every kind of layer work of a ResNet-50 step, its
// intervals do not overlap (their sum fits in the step's span on the one stream), and a context
// without a timer records nothing.
TEST_F(GpuResNetTest, OpTimerSeesEveryKindOfLayerWorkWithinTheStep) {
  cuda::GpuContext context(0, cuda::ConvNumerics::kBf16Nhwc, /*allow_tf32=*/false);
  cuda::GpuResNet model(config_, context);
  runtime::Tensor x(context.activation_dtype(), {kBatch, 3, kSide, kSide}, runtime::MemoryKind::kDevice);
  const std::vector<unsigned char> encoded = encode(image_, true);
  DTRAIN_CUDA_CHECK(cudaMemcpy(x.raw(), encoded.data(), encoded.size(), cudaMemcpyHostToDevice));
  runtime::Tensor dlogits(context.activation_dtype(), {kBatch, kClasses}, runtime::MemoryKind::kDevice);
  DTRAIN_CUDA_CHECK(cudaMemset(dlogits.raw(), 0, dlogits.bytes()));
  const auto step = [&] {
    model.forward(x, true);
    model.backward(dlogits);
  };
  step();  // plans and workspaces chosen before the timed step

  cuda::OpTimer timer(context.stream());
  context.set_op_timer(&timer);
  runtime::CudaEvent begin(true), end(true);
  begin.record(context.stream());
  step();
  end.record(context.stream());
  context.set_op_timer(nullptr);
  timer.collect();
  end.synchronize();
  const double span = end.elapsed_ms_since(begin);
  double sum = 0;
  for (int kind = 0; kind < cuda::OpTimer::kKinds; ++kind) {
    const double ms = timer.total_ms()[kind];
    std::printf("  %-30s %8.3f ms\n", cuda::OpTimer::name(static_cast<cuda::OpTimer::Kind>(kind)), ms);
    EXPECT_GT(ms, 0.0) << cuda::OpTimer::name(static_cast<cuda::OpTimer::Kind>(kind));
    sum += ms;
  }
  std::printf("  sum %.3f ms of the step's %.3f ms\n", sum, span);
  EXPECT_LE(sum, span * 1.001 + 1e-3);
  EXPECT_GT(sum, 0.3 * span) << "the layers' kernels are most of a step (small batch: launches show as gaps)";

  const std::array<double, cuda::OpTimer::kKinds> before = timer.total_ms();
  step();
  timer.collect();
  EXPECT_EQ(timer.total_ms(), before) << "a step without the timer installed added to it";
}

#else
TEST(GpuResNetTest, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
}
#endif

}  // namespace
}  // namespace dtrain::models
