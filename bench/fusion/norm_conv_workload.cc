#include "bench/fusion/norm_conv_workload.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "bench/fusion/norm_conv_kernels.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/memory/dtype.h"

namespace dtrain::bench::fusion {
namespace {

constexpr size_t kWorkspaceLimit = size_t{1} << 30;
// Input ranges: x around zero so that the ReLU keeps about half, scale and bias of a trained BN's
// magnitude, filters scaled by 1/sqrt(fan-in) so that y stays near unit size.
constexpr float kDyLo = -1.0f, kDyHi = 1.0f;  // output gradients, for the weight gradient
constexpr float kXLo = -1.0f, kXHi = 1.0f, kScaleLo = 0.5f, kScaleHi = 1.5f, kBiasLo = -0.5f, kBiasHi = 0.5f;

size_t element_bytes() {
  return 2;  // bf16 and fp16
}

float filter_bound(const models::Conv2dShape& g) {
  return 1.0f / std::sqrt(static_cast<float>(g.in_channels * g.kernel_h * g.kernel_w));
}

int64_t rows_in(const models::Conv2dShape& g) {
  return int64_t{g.batch} * g.in_h * g.in_w;
}
int64_t rows_out(const models::Conv2dShape& g) {
  return int64_t{g.batch} * g.out_h() * g.out_w();
}

// Host values rounded to the element type, and their bits for the device.
struct HostTensor {
  std::vector<double> values;
  std::vector<uint16_t> bits;
};

uint16_t to_bits(Element e, float v) {
  return e == Element::kBf16 ? runtime::to_bfloat16(v).bits : runtime::to_float16(v).bits;
}
float from_bits(Element e, uint16_t b) {
  return e == Element::kBf16 ? runtime::to_float(runtime::bfloat16{b}) : runtime::to_float(runtime::float16{b});
}

HostTensor random_tensor(Element e, int64_t count, float lo, float hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> uniform(lo, hi);
  HostTensor t;
  for (int64_t i = 0; i < count; ++i) {
    t.bits.push_back(to_bits(e, uniform(rng)));
    t.values.push_back(from_bits(e, t.bits.back()));
  }
  return t;
}

void upload(const HostTensor& t, const DeviceMemory& to) {
  DTRAIN_CUDA_CHECK(cudaMemcpy(to.get(), t.bits.data(), t.bits.size() * 2, cudaMemcpyHostToDevice));
}

// Calls f(o, i, t) for every (output pixel o, input pixel i, filter tap t) that the convolution
// multiplies, pixels indexed NHW (rows of the NHWC tensors), taps RS.
template <typename F>
void for_each_tap(const models::Conv2dShape& g, F&& f) {
  const int P = g.out_h(), Q = g.out_w();
  for (int n = 0; n < g.batch; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q)
        for (int u = 0; u < g.kernel_h; ++u)
          for (int v = 0; v < g.kernel_w; ++v) {
            const int h = p * g.stride_h - g.pad_h + u, col = q * g.stride_w - g.pad_w + v;
            if (h < 0 || h >= g.in_h || col < 0 || col >= g.in_w) continue;
            f((static_cast<size_t>(n) * P + p) * Q + q, (static_cast<size_t>(n) * g.in_h + h) * g.in_w + col,
              static_cast<size_t>(u) * g.kernel_w + v);
          }
}

struct Reference {
  std::vector<double> out, sum, sqsum, abs_sum;  // out: Y (NHWC) or dW (KRSC)
};

// The pattern's outputs in double: y = conv(prologue(x), w) and its per-channel statistics, or
// dW = wgrad(prologue(x), dy). x and dy are NHWC, w and dW KRSC; `filter_or_dy` is w or dy.
Reference reference(const GraphSpec& spec, const HostTensor& x, const HostTensor& filter_or_dy, const HostTensor& scale,
                    const HostTensor& bias) {
  const models::Conv2dShape& g = spec.shape;
  const size_t C = g.in_channels, K = g.out_channels, taps = size_t{1} * g.kernel_h * g.kernel_w;
  std::vector<double> a = x.values;
  if (spec.prologue) {
    for (size_t i = 0; i < a.size(); ++i) a[i] = std::max(a[i] * scale.values[i % C] + bias.values[i % C], 0.0);
  }
  const std::vector<double>& b = filter_or_dy.values;
  Reference r;
  if (spec.direction == Direction::kWgrad) {
    r.out.assign(K * taps * C, 0.0);
    for_each_tap(g, [&](size_t o, size_t i, size_t t) {
      for (size_t k = 0; k < K; ++k)
        for (size_t c = 0; c < C; ++c) r.out[(k * taps + t) * C + c] += b[o * K + k] * a[i * C + c];
    });
    return r;
  }
  r.out.assign(static_cast<size_t>(rows_out(g)) * K, 0.0);
  for_each_tap(g, [&](size_t o, size_t i, size_t t) {
    for (size_t k = 0; k < K; ++k)
      for (size_t c = 0; c < C; ++c) r.out[o * K + k] += a[i * C + c] * b[(k * taps + t) * C + c];
  });
  r.sum.assign(K, 0.0), r.sqsum.assign(K, 0.0), r.abs_sum.assign(K, 0.0);
  for (size_t i = 0; i < r.out.size(); ++i) {
    const double v = r.out[i];
    r.sum[i % K] += v, r.sqsum[i % K] += v * v, r.abs_sum[i % K] += std::fabs(v);
  }
  return r;
}

struct Errors {
  double out = 0, stats = 0;
};

// The path's outputs now in the workload (Y or dW, and sum and sqsum) against the reference.
Errors compare(const Workload& wl, const Reference& want) {
  Errors e;
  e.out = relative_error(output_values(wl), want.out);
  if (!wl.spec.stats) return e;
  const size_t K = want.sum.size();
  std::vector<float> sum(K), sqsum(K);
  DTRAIN_CUDA_CHECK(cudaMemcpy(sum.data(), wl.sum.get(), K * 4, cudaMemcpyDeviceToHost));
  DTRAIN_CUDA_CHECK(cudaMemcpy(sqsum.data(), wl.sqsum.get(), K * 4, cudaMemcpyDeviceToHost));
  for (size_t k = 0; k < K; ++k) {
    const double s = std::fabs(sum[k] - want.sum[k]) / want.abs_sum[k];
    const double q = std::fabs(sqsum[k] - want.sqsum[k]) / want.sqsum[k];
    if (std::isnan(s) || std::isnan(q)) return {e.out, std::nan("")};
    e.stats = std::max({e.stats, s, q});
  }
  return e;
}

// Marks the outputs unwritten (all-ones bytes are NaN in bf16, fp16 and fp32).
void poison(cudaStream_t stream, const Workload& wl) {
  const size_t k_bytes = size_t{4} * wl.spec.shape.out_channels;
  DTRAIN_CUDA_CHECK(cudaMemsetAsync(wl.output(), 0xff, wl.output_count() * element_bytes(), stream));
  DTRAIN_CUDA_CHECK(cudaMemsetAsync(wl.sum.get(), 0xff, k_bytes, stream));
  DTRAIN_CUDA_CHECK(cudaMemsetAsync(wl.sqsum.get(), 0xff, k_bytes, stream));
}

void zero_stats(cudaStream_t stream, const Workload& wl) {
  const size_t k_bytes = size_t{4} * wl.spec.shape.out_channels;
  DTRAIN_CUDA_CHECK(cudaMemsetAsync(wl.sum.get(), 0, k_bytes, stream));
  DTRAIN_CUDA_CHECK(cudaMemsetAsync(wl.sqsum.get(), 0, k_bytes, stream));
}

// Runs `plan` and waits; false when cuDNN does not run it.
bool run_fused(cudnnHandle_t handle, cudaStream_t stream, const FusedPlan& plan,
               const models::cuda::BackendDescriptor& pack) {
  const cudnnStatus_t status = execute(handle, plan, pack);
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream)) << "running fused engine " << plan.engine.index;
  return status == CUDNN_STATUS_SUCCESS;
}

void record(CheckResult& r, const Errors& e, const std::string& path) {
  r.worst_output = std::isnan(e.out) ? e.out : std::max(r.worst_output, e.out);
  r.worst_stats = std::isnan(e.stats) ? e.stats : std::max(r.worst_stats, e.stats);
  if (e.out <= r.bound_output && e.stats <= r.bound_stats) return;
  r.passed = false;
  std::ostringstream s;
  s << path << ": " << r.output << " error " << e.out << " (bound " << r.bound_output << "), statistics error "
    << e.stats << " (bound " << r.bound_stats << "); ";
  r.failure += s.str();
}

// The unfused path (prologue kernel, the first plain-convolution or wgrad plan, statistics kernel) into
// the workload's outputs.
void run_unfused(cudnnHandle_t handle, cudaStream_t stream, const Workload& wl) {
  const models::cuda::BackendDescriptor graph = build_graph(handle, wl.conv_spec);
  const PlanSearch conv = find_plans(handle, graph, kStepFilter, kWorkspaceLimit, 1);
  DTRAIN_CHECK(!conv.plans.empty()) << "cuDNN has no plain convolution plan for " << wl.spec.shape.describe();
  const DeviceMemory workspace = workspace_for(conv.plans);
  if (wl.spec.prologue) wl.unfused_prologue(stream);
  const models::cuda::BackendDescriptor pack = variant_pack(wl.conv_spec, wl.plain_conv(), workspace.get());
  DTRAIN_CUDNN_CHECK(execute(handle, conv.plans[0], pack))
      << "running the plain convolution of " << wl.spec.shape.describe();
  if (wl.spec.stats) wl.unfused_stats(stream);
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream)) << "the unfused path";
}

}  // namespace

void FreeDeviceMemory::operator()(void* p) const noexcept {
  cudaFree(p);
}

DeviceMemory device_bytes(size_t bytes, const char* what) {
  void* p = nullptr;
  if (bytes > 0) DTRAIN_CUDA_CHECK(cudaMalloc(&p, bytes)) << "allocating " << bytes << " bytes for " << what;
  return DeviceMemory(p);
}

DeviceMemory workspace_for(const std::vector<FusedPlan>& plans) {
  int64_t most = 0;
  for (const FusedPlan& p : plans) most = std::max(most, p.workspace_bytes);
  return device_bytes(static_cast<size_t>(most), "cuDNN workspace");
}

Workload::Workload(const GraphSpec& s) : spec(s), conv_spec(plain(s)) {
  const models::Conv2dShape& g = spec.shape;
  const size_t e = element_bytes();
  const bool wgrad = spec.direction == Direction::kWgrad;
  x = device_bytes(static_cast<size_t>(g.input_size()) * e, "x");
  w = device_bytes(static_cast<size_t>(g.filter_size()) * e, wgrad ? "dW" : "w");
  y = device_bytes(static_cast<size_t>(g.output_size()) * e, wgrad ? "dY" : "y");
  scale = device_bytes(static_cast<size_t>(g.in_channels) * e, "scale");
  bias = device_bytes(static_cast<size_t>(g.in_channels) * e, "bias");
  if (spec.prologue) activated = device_bytes(static_cast<size_t>(g.input_size()) * e, "the activated input");
  sum = device_bytes(static_cast<size_t>(g.out_channels) * 4, "sum");
  sqsum = device_bytes(static_cast<size_t>(g.out_channels) * 4, "sqsum");
  partials = device_bytes(channel_sums_scratch_floats(rows_out(g), g.out_channels) * 4, "partial sums");
}

void Workload::fill(cudaStream_t stream, uint64_t seed) {
  const models::Conv2dShape& g = spec.shape;
  const float f = filter_bound(g);
  fill_uniform(stream, spec.element, x.get(), g.input_size(), seed, kXLo, kXHi);
  if (spec.direction == Direction::kWgrad)
    fill_uniform(stream, spec.element, y.get(), g.output_size(), seed + 1, kDyLo, kDyHi);
  else
    fill_uniform(stream, spec.element, w.get(), g.filter_size(), seed + 1, -f, f);
  fill_uniform(stream, spec.element, scale.get(), g.in_channels, seed + 2, kScaleLo, kScaleHi);
  fill_uniform(stream, spec.element, bias.get(), g.in_channels, seed + 3, kBiasLo, kBiasHi);
}

GraphOperands Workload::fused() const {
  return {x.get(),
          w.get(),
          y.get(),
          scale.get(),
          bias.get(),
          static_cast<float*>(sum.get()),
          static_cast<float*>(sqsum.get())};
}

GraphOperands Workload::plain_conv() const {
  GraphOperands o;
  o.x = spec.prologue ? activated.get() : x.get();
  o.w = w.get();
  o.y = y.get();
  return o;
}

void Workload::unfused_prologue(cudaStream_t stream) const {
  scale_bias_relu(stream, spec.element, x.get(), scale.get(), bias.get(), activated.get(), rows_in(spec.shape),
                  spec.shape.in_channels);
}

void Workload::unfused_stats(cudaStream_t stream) const {
  channel_sums(stream, spec.element, y.get(), rows_out(spec.shape), spec.shape.out_channels,
               static_cast<float*>(partials.get()), static_cast<float*>(sum.get()), static_cast<float*>(sqsum.get()));
}

void* Workload::output() const {
  return spec.direction == Direction::kWgrad ? w.get() : y.get();
}

size_t Workload::output_count() const {
  const models::Conv2dShape& g = spec.shape;
  return static_cast<size_t>(spec.direction == Direction::kWgrad ? g.filter_size() : g.output_size());
}

std::vector<double> output_values(const Workload& wl) {
  std::vector<uint16_t> bits(wl.output_count());
  DTRAIN_CUDA_CHECK(cudaMemcpy(bits.data(), wl.output(), bits.size() * 2, cudaMemcpyDeviceToHost))
      << "reading the convolution's output";
  std::vector<double> values(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) values[i] = from_bits(wl.spec.element, bits[i]);
  return values;
}

double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double squares = 0;
  for (double v : want) squares += v * v;
  const double rms = std::sqrt(squares / static_cast<double>(std::max<size_t>(want.size(), 1)));
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(got[i] - want[i]) / (std::fabs(want[i]) + rms);
    if (std::isnan(err)) return err;  // an output never written
    worst = std::max(worst, err);
  }
  return worst;
}

double error_bound(Element element) {
  // Output rounding is at most 2^-9 (bf16) or 2^-12 (fp16) of a value; rounding the activated
  // input before the tensor cores adds about as much again. The bounds allow 4x (bf16), 8x (fp16).
  return element == Element::kBf16 ? 1.0 / 64 : 1.0 / 256;
}

CheckResult check_small(cudnnHandle_t handle, cudaStream_t stream, const GraphSpec& spec, uint64_t seed,
                        const EngineFilter& fused_filter) {
  CheckResult r;
  r.bound_output = r.bound_stats = error_bound(spec.element);
  r.output = spec.direction == Direction::kWgrad ? "dW" : "y";
  const models::Conv2dShape& g = spec.shape;
  Workload wl(spec);
  std::mt19937_64 rng(seed);
  const float f = filter_bound(g);
  const HostTensor x = random_tensor(spec.element, g.input_size(), kXLo, kXHi, rng);
  const bool wgrad = spec.direction == Direction::kWgrad;
  const HostTensor w_or_dy = wgrad ? random_tensor(spec.element, g.output_size(), kDyLo, kDyHi, rng)
                                   : random_tensor(spec.element, g.filter_size(), -f, f, rng);
  const HostTensor scale = random_tensor(spec.element, g.in_channels, kScaleLo, kScaleHi, rng);
  const HostTensor bias = random_tensor(spec.element, g.in_channels, kBiasLo, kBiasHi, rng);
  upload(x, wl.x), upload(w_or_dy, wgrad ? wl.y : wl.w), upload(scale, wl.scale), upload(bias, wl.bias);
  DTRAIN_CUDA_CHECK(cudaDeviceSynchronize()) << "uploading the check's inputs";  // `stream` may not wait for them
  const Reference want = reference(spec, x, w_or_dy, scale, bias);

  DTRAIN_CUDNN_CHECK(cudnnSetStream(handle, stream));
  const models::cuda::BackendDescriptor graph = build_graph(handle, spec);
  const PlanSearch fused = find_plans(handle, graph, fused_filter, kWorkspaceLimit, 16);
  r.supported = !fused.plans.empty();
  const DeviceMemory workspace = workspace_for(fused.plans);
  const models::cuda::BackendDescriptor pack = variant_pack(spec, wl.fused(), workspace.get());
  for (const FusedPlan& plan : fused.plans) {
    poison(stream, wl);
    if (!run_fused(handle, stream, plan, pack)) continue;  // a plan that does not run is skipped, as timing skips it
    ++r.plans_checked;
    Errors e = compare(wl, want);
    if (spec.stats && std::isnan(e.stats) && !std::isnan(e.out)) {
      // Statistics added onto their outputs (atomics, no zeroing of their own): again from zero.
      zero_stats(stream, wl);
      run_fused(handle, stream, plan, pack);
      const Errors from_zero = compare(wl, want);
      if (!std::isnan(from_zero.stats)) e = from_zero, r.needs_zeroed_stats = true;
    }
    record(r, e, "fused engine " + std::to_string(plan.engine.index));
  }
  poison(stream, wl);
  run_unfused(handle, stream, wl);
  record(r, compare(wl, want), "unfused path");
  return r;
}

}  // namespace dtrain::bench::fusion
