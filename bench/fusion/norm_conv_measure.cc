#include "bench/fusion/norm_conv_measure.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "bench/fusion/norm_conv_workload.h"
#include "runtime/base/error.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/stream.h"

namespace dtrain::bench::fusion {
namespace {

using models::cuda::BackendDescriptor;

constexpr size_t kWorkspaceLimit = size_t{1} << 30;  // as the step's search: at most 1 GiB
constexpr int kChoiceRuns = 5;

// How a median is taken: untimed runs, then `samples` timings of `runs` back-to-back runs each.
struct Sampling {
  int warmup, samples, runs;
};

// The median over the samples of one run's milliseconds. The runs of a sample are queued back to
// back between the two events, so that the GPU, not the host's launch of each, sets the time.
template <typename Enqueue>
double median_ms(cudaStream_t stream, const Sampling& how, Enqueue&& enqueue) {
  for (int i = 0; i < how.warmup; ++i) enqueue();
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream)) << "warm-up runs";
  runtime::CudaEvent start(/*timing=*/true), stop(/*timing=*/true);
  std::vector<float> ms;
  for (int i = 0; i < how.samples; ++i) {
    start.record(stream);
    for (int r = 0; r < how.runs; ++r) enqueue();
    stop.record(stream);
    stop.synchronize();
    ms.push_back(stop.elapsed_ms_since(start) / static_cast<float>(how.runs));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

Sampling timed(const TimingOptions& o) {
  return {o.warmup, o.iterations, o.runs_per_sample};
}

void run(cudnnHandle_t handle, const FusedPlan& plan, const BackendDescriptor& pack) {
  DTRAIN_CUDNN_CHECK(execute(handle, plan, pack)) << "running cuDNN engine " << plan.engine.index;
}

// The index of the fastest plan on `pack` (a short timing each), or -1 when none runs; the plans
// whose first run cuDNN refused go to `failed`, with its status.
int fastest(cudnnHandle_t handle, cudaStream_t stream, const std::vector<FusedPlan>& plans,
            const BackendDescriptor& pack, int runs_per_sample, std::vector<EngineNotes>& failed) {
  int best = -1;
  double best_ms = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    const cudnnStatus_t status = execute(handle, plans[i], pack);
    if (status != CUDNN_STATUS_SUCCESS) {
      failed.push_back(plans[i].engine);
      failed.back().refusal = std::string("execute: ") + cudnnGetErrorString(status);
      continue;
    }
    DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream)) << "a first run of cuDNN engine " << plans[i].engine.index;
    const double ms = median_ms(stream, {0, kChoiceRuns, runs_per_sample}, [&] { run(handle, plans[i], pack); });
    if (best < 0 || ms < best_ms) best = static_cast<int>(i), best_ms = ms;
  }
  return best;
}

struct Stats {
  std::vector<float> sum, sqsum;
};

Stats read_stats(const Workload& wl) {
  const size_t k = static_cast<size_t>(wl.spec.shape.out_channels);
  Stats s{std::vector<float>(k), std::vector<float>(k)};
  DTRAIN_CUDA_CHECK(cudaMemcpy(s.sum.data(), wl.sum.get(), k * 4, cudaMemcpyDeviceToHost));
  DTRAIN_CUDA_CHECK(cudaMemcpy(s.sqsum.data(), wl.sqsum.get(), k * 4, cudaMemcpyDeviceToHost));
  return s;
}

// The fused statistics against the unfused path's: sums relative to sqrt(count * sqsum) (at least
// sum |y|), squares relative to themselves. NaN when an output was not written.
double stats_error(const Stats& fused, const Stats& unfused, double count) {
  double worst = 0;
  for (size_t k = 0; k < fused.sum.size(); ++k) {
    const double s = std::fabs(fused.sum[k] - unfused.sum[k]) / std::sqrt(count * unfused.sqsum[k]);
    const double q = std::fabs(fused.sqsum[k] - unfused.sqsum[k]) / unfused.sqsum[k];
    if (std::isnan(s) || std::isnan(q)) return std::nan("");
    worst = std::max({worst, s, q});
  }
  return worst;
}

// What the unfused path left, for the fused plan's outputs to agree with.
struct UnfusedOutputs {
  Stats stats;             // sum and sqsum of Y (forward graphs)
  std::vector<double> dw;  // weight gradients
};

// Runs the fused plan once onto NaN statistics (and, if they stay NaN, once more onto zeroed ones:
// an engine that adds onto its outputs) and compares them with the unfused path's.
void compare_fused_stats(cudnnHandle_t handle, cudaStream_t stream, const FusedPlan& plan,
                         const BackendDescriptor& pack, const Workload& wl, const Stats& unfused, Measurement& m) {
  const models::Conv2dShape& g = wl.spec.shape;
  const size_t k_bytes = size_t{4} * g.out_channels;
  const double count = static_cast<double>(g.output_size() / g.out_channels);
  for (const int fill : {0xff, 0}) {
    DTRAIN_CUDA_CHECK(cudaMemsetAsync(wl.sum.get(), fill, k_bytes, stream));
    DTRAIN_CUDA_CHECK(cudaMemsetAsync(wl.sqsum.get(), fill, k_bytes, stream));
    run(handle, plan, pack);
    DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream)) << "the fused plan";
    m.agree_error = stats_error(read_stats(wl), unfused, count);
    m.needs_zeroed_stats = fill == 0;
    if (!std::isnan(m.agree_error)) break;
  }
}

// The fused plan's outputs against the unfused path's (Measurement::compared). The output starts
// as NaN, so one that the plan leaves unwritten disagrees.
void compare_outputs(cudnnHandle_t handle, cudaStream_t stream, const FusedPlan& plan, const BackendDescriptor& pack,
                     const Workload& wl, const UnfusedOutputs& unfused, Measurement& m) {
  const bool wgrad = wl.spec.direction == Direction::kWgrad;
  m.compared = wl.spec.stats ? "sum/sqsum" : wgrad ? "dW" : "sums of Y";
  if (wl.spec.stats) {
    compare_fused_stats(handle, stream, plan, pack, wl, unfused.stats, m);
  } else {
    DTRAIN_CUDA_CHECK(cudaMemsetAsync(wl.output(), 0xff, wl.output_count() * 2, stream));
    run(handle, plan, pack);
    if (!wgrad) wl.unfused_stats(stream);  // of the fused plan's Y
    DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream)) << "the fused plan";
    const models::Conv2dShape& g = wl.spec.shape;
    m.agree_error =
        wgrad ? relative_error(output_values(wl), unfused.dw)
              : stats_error(read_stats(wl), unfused.stats, static_cast<double>(g.output_size() / g.out_channels));
  }
  m.agree = m.agree_error <= error_bound(wl.spec.element);
}

// What the unfused path left, read back after one run of its sequence.
UnfusedOutputs unfused_outputs(const Workload& wl) {
  UnfusedOutputs out;
  if (wl.spec.direction == Direction::kWgrad)
    out.dw = output_values(wl);
  else
    out.stats = read_stats(wl);
  return out;
}

// Times the unfused sequence as a whole and its parts alone into `m`; its outputs into `out`.
// False (and m.status says why) when cuDNN has no plain plan that runs.
bool time_unfused(cudnnHandle_t handle, cudaStream_t stream, const Workload& wl, const TimingOptions& o, Measurement& m,
                  UnfusedOutputs& out) {
  const GraphSpec& spec = wl.spec;
  const BackendDescriptor graph = build_graph(handle, wl.conv_spec);
  const PlanSearch conv = find_plans(handle, graph, kStepFilter, kWorkspaceLimit, o.candidates);
  if (conv.plans.empty()) {
    m.status = "error: cuDNN has no plain convolution plan (" + describe(conv.heuristics) + ")";
    return false;
  }
  const DeviceMemory workspace = workspace_for(conv.plans);
  const BackendDescriptor pack = variant_pack(wl.conv_spec, wl.plain_conv(), workspace.get());
  if (spec.prologue) wl.unfused_prologue(stream);  // the convolution's input, as the step has it
  std::vector<EngineNotes> failed;
  const int chosen = fastest(handle, stream, conv.plans, pack, o.runs_per_sample, failed);
  if (chosen < 0) {
    m.status = "error: no plain convolution plan ran (" + std::to_string(failed.size()) + " failed, first " +
               failed.front().refusal + ")";
    return false;
  }
  const FusedPlan& plan = conv.plans[static_cast<size_t>(chosen)];
  m.conv_engine = plan.engine.index;
  const bool wgrad = spec.direction == Direction::kWgrad;
  // As the step runs it; the statistics kernel also without fused statistics, for the sums of Y to
  // compare the fused Y with (its time counts only where the pattern has statistics).
  const auto sequence = [&](bool stats) {
    if (spec.prologue) wl.unfused_prologue(stream);
    run(handle, plan, pack);
    if (stats) wl.unfused_stats(stream);
  };
  m.unfused_ms = median_ms(stream, timed(o), [&] { sequence(spec.stats); });
  m.conv_ms = median_ms(stream, timed(o), [&] { run(handle, plan, pack); });
  if (spec.prologue) m.prologue_ms = median_ms(stream, timed(o), [&] { wl.unfused_prologue(stream); });
  if (spec.stats) m.stats_ms = median_ms(stream, timed(o), [&] { wl.unfused_stats(stream); });
  sequence(!wgrad);
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream)) << "the unfused path";
  out = unfused_outputs(wl);
  return true;
}

// Chooses, checks and times the fused plan of `graph` into `m`.
void time_fused(cudnnHandle_t handle, cudaStream_t stream, const BackendDescriptor& graph, const Workload& wl,
                const UnfusedOutputs& unfused, const TimingOptions& o, Measurement& m) {
  PlanSearch search = find_plans(handle, graph, o.fused_filter, kWorkspaceLimit, o.candidates);
  m.offered = search.offered;
  m.heuristics = search.heuristics;
  m.refused = search.refused;
  if (search.plans.empty()) {
    m.status = "unsupported";
    return;
  }
  const DeviceMemory workspace = workspace_for(search.plans);
  const BackendDescriptor pack = variant_pack(wl.spec, wl.fused(), workspace.get());
  const int chosen = fastest(handle, stream, search.plans, pack, o.runs_per_sample, m.refused);
  if (chosen < 0) {
    m.status = "unsupported";  // plans finalized, but none ran
    return;
  }
  std::rotate(search.plans.begin(), search.plans.begin() + chosen, search.plans.begin() + chosen + 1);
  for (const FusedPlan& p : search.plans) m.engines.push_back(p.engine);
  const FusedPlan& plan = search.plans.front();
  m.plan_description = plan_description(plan);
  compare_outputs(handle, stream, plan, pack, wl, unfused, m);
  const size_t k_bytes = size_t{4} * wl.spec.shape.out_channels;
  m.fused_ms = median_ms(stream, timed(o), [&] {
    if (m.needs_zeroed_stats) {  // the step would have to clear them too
      DTRAIN_CUDA_CHECK(cudaMemsetAsync(wl.sum.get(), 0, k_bytes, stream));
      DTRAIN_CUDA_CHECK(cudaMemsetAsync(wl.sqsum.get(), 0, k_bytes, stream));
    }
    run(handle, plan, pack);
  });
}

}  // namespace

Measurement measure(cudnnHandle_t handle, cudaStream_t stream, const GraphSpec& spec, const TimingOptions& o) {
  Measurement m;
  DTRAIN_CUDNN_CHECK(cudnnSetStream(handle, stream));
  Workload wl(spec);
  wl.fill(stream, o.seed);
  UnfusedOutputs unfused;
  try {
    if (!time_unfused(handle, stream, wl, o, m, unfused)) return m;
  } catch (const runtime::CudnnError& e) {
    m.status = std::string("error: the unfused path: ") + e.what();
    return m;
  }
  BackendDescriptor graph;
  try {
    graph = build_graph(handle, spec);
  } catch (const runtime::CudnnError& e) {
    m.status = std::string("rejected: ") + e.what();
    return m;
  }
  try {
    time_fused(handle, stream, graph, wl, unfused, o, m);
  } catch (const runtime::CudnnError& e) {
    m.status = std::string("error: the fused plan: ") + e.what();
  }
  return m;
}

}  // namespace dtrain::bench::fusion
