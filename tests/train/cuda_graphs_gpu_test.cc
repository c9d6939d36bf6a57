// The GPU step replayed from CUDA graphs (the default) against the eager step, on fresh
// random images and labels (same seed, same data, same initialization), a small bf16 NHWC ResNet
// with batch norm: 12 steps at a learning rate that changes every step (a graph must read it, not
// replay the captured one), a backbone lr scale changed midway (a new decay table: the graphs
// must be dropped), and an evaluation of a partial batch midway (another forward, fewer rows: no
// stale graph after it). The loss of every step, the evaluation's totals and the final parameters
// must match eager within bf16 noise: the bound is the larger of a floor and 4x the difference
// between two eager runs (cuDNN may choose nondeterministic backward kernels). A replay of a
// stale input slot, lr or table moves the parameters by a different update: tens of percent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/rank/gpu_binding.h"

#if DTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "runtime/cuda/cuda_check.h"
#include "runtime/memory/buffer.h"
#include "tests/support/test_seed.h"
#include "tests/train/cuda_graphs_test_support.h"
#endif

namespace dtrain::train {
namespace {

#if DTRAIN_WITH_CUDA
class CudaGraphsGpuTest : public testing::Test {
 protected:
  void SetUp() override {
    if (runtime::detail::runtime_visible_gpus().empty()) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
    DTRAIN_CUDA_CHECK(cudaSetDevice(0));
  }
};

struct Data {
  runtime::Buffer images, labels;
  explicit Data(uint64_t seed)
      : images(runtime::MemoryKind::kPinnedHost, size_t{kSteps + 1} * kBatch * 3 * kSide * kSide),
        labels(runtime::MemoryKind::kPinnedHost, size_t{kSteps + 1} * kBatch * sizeof(int32_t)) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    for (size_t i = 0; i < images.bytes(); ++i) static_cast<uint8_t*>(images.data())[i] = static_cast<uint8_t>(rng());
    for (size_t i = 0; i < labels.bytes() / sizeof(int32_t); ++i) {
      static_cast<int32_t*>(labels.data())[i] = static_cast<int32_t>(rng() % kClasses);
    }
  }
  const uint8_t* image(int batch) const {
    return static_cast<const uint8_t*>(images.data()) + size_t(batch) * kBatch * 3 * kSide * kSide;
  }
  const int32_t* label(int batch) const { return static_cast<const int32_t*>(labels.data()) + size_t(batch) * kBatch; }
};

struct Trajectory : StepTrajectory {
  models::cuda::EvalAccumulators eval{};
};

// before_step(s), when given, runs before step s of the trajectory.
Trajectory train(bool graphs, const Data& data, const std::function<void(int)>& before_step = {}) {
  cuda::GpuTrainStep step(graph_test_step_options(graphs), nullptr, 0);
  Trajectory t;
  models::ParameterSet& p = step.model().parameters();
  t.initial.assign(p.params_flat(), p.params_flat() + p.flat_size());
  for (int s = 0; s < kSteps; ++s) {
    if (before_step) before_step(s);
    if (s == 6) {  // a partial batch (5 of 8 rows) through the eval-mode forward
      step.begin_evaluation();
      step.evaluate(data.image(kSteps), data.label(kSteps), 5);
      t.eval = step.end_evaluation();
    }
    if (s == 8) step.set_backbone_lr_scale(0.5f);
    step.run(data.image(s), data.label(s), 0.02f * static_cast<float>(1 + s % 3));
    t.losses.push_back(step.last_result().mean_loss);
  }
  step.synchronize();
  step.model().sync_to_host();
  t.params.assign(p.params_flat(), p.params_flat() + p.flat_size());
  t.replays = step.graph_replays();
  t.report = step.cuda_graphs_report();
  return t;
}

TEST_F(CudaGraphsGpuTest, ReplayedStepsTrainAsTheEagerStep) {
  const uint64_t seed = test::random_seed();
  std::printf("  seed %llu\n", static_cast<unsigned long long>(seed));
  const Data data(seed);
  const Trajectory eager = train(false, data), again = train(false, data), graphed = train(true, data);
  std::printf("  graphs: %s\n", graphed.report.c_str());
  // Captured after the eager warm-up, again after the evaluation and the new lr scale table.
  EXPECT_EQ(graphed.replays, kSteps - cuda::GpuTrainStep::kEagerStepsBeforeCapture);
  EXPECT_EQ(eager.replays, 0);
  const GraphsAgainstEager d = compare_to_eager(graphed, eager, again);
  std::printf("  eager vs eager: updates %.2e, losses %.2e; graphs vs eager: updates %.2e, losses %.2e\n",
              d.noise_update, d.noise_loss, d.update, d.loss);
  for (int s = 0; s < kSteps; ++s) std::printf("  step %2d loss %.6f %.6f\n", s, eager.losses[s], graphed.losses[s]);
  EXPECT_LE(d.update, d.update_bound());
  EXPECT_LE(d.loss, d.loss_bound());
  EXPECT_EQ(graphed.eval.images, 5u);
  EXPECT_EQ(graphed.eval.images, eager.eval.images);
  EXPECT_NEAR(graphed.eval.loss_sum, eager.eval.loss_sum, d.loss_bound() * std::fabs(eager.eval.loss_sum));
}

// The graph pool is the device's: a second step on the GPU, made before the first captured (so
// set up for graphs), stays eager at its capture point and says why, and dropping it leaves the
// first one's graphs and their memory alone: the first still trains as the eager step.
TEST_F(CudaGraphsGpuTest, ASecondStepOnTheGpuStaysEagerAndLeavesTheFirstOnesGraphsAlone) {
  const uint64_t seed = test::random_seed();
  std::printf("  seed %llu\n", static_cast<unsigned long long>(seed));
  const Data data(seed);
  const Trajectory eager = train(false, data), again = train(false, data);
  constexpr int kWarm = cuda::GpuTrainStep::kEagerStepsBeforeCapture;
  std::unique_ptr<cuda::GpuTrainStep> second;
  std::string second_report;
  long second_replays = -1;
  const Trajectory graphed = train(true, data, [&](int s) {
    if (s == 0) second = std::make_unique<cuda::GpuTrainStep>(graph_test_step_options(true), nullptr, 0);
    if (s == kWarm + 1) {  // the first step has captured: the second reaches its capture point
      for (int k = 0; k <= kWarm; ++k) second->run(data.image(k), data.label(k), 0.01f);
      second->synchronize();
      second_report = second->cuda_graphs_report();
      second_replays = second->graph_replays();
    }
    if (s == kWarm + 2) second.reset();
  });
  std::printf("  second step: %s; first: %s\n", second_report.c_str(), graphed.report.c_str());
  EXPECT_EQ(second_report.rfind("off: another step on GPU 0 holds CUDA graphs", 0), 0u) << second_report;
  EXPECT_EQ(second_replays, 0);
  EXPECT_EQ(graphed.replays, kSteps - kWarm);
  const GraphsAgainstEager d = compare_to_eager(graphed, eager, again);
  std::printf("  eager vs eager: updates %.2e, losses %.2e; graphs vs eager: updates %.2e, losses %.2e\n",
              d.noise_update, d.noise_loss, d.update, d.loss);
  EXPECT_LE(d.update, d.update_bound());
  EXPECT_LE(d.loss, d.loss_bound());
}

// Where graphs do not apply the step says why and stays eager.
TEST_F(CudaGraphsGpuTest, AccumulationStaysEagerAndSaysWhy) {
  cuda::GpuStepOptions o = graph_test_step_options(true);
  o.accumulation_steps = 2;
  cuda::GpuTrainStep step(o, nullptr, 0);
  EXPECT_EQ(step.cuda_graphs_report().rfind("off: accumulation_steps is 2", 0), 0u) << step.cuda_graphs_report();
  cuda::GpuTrainStep plain(graph_test_step_options(false), nullptr, 0);
  EXPECT_EQ(plain.cuda_graphs_report(), "off: DTRAIN_CUDA_GRAPHS=0");
}

#else
TEST(CudaGraphsGpuTest, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
}
#endif

}  // namespace
}  // namespace dtrain::train
