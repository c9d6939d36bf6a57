// The GPU train step on a GPU other than the current one: every CUDA object it makes (streams,
// events of the input slots, of the timeline and of the step profile) belongs to its own device, so
// a rank whose GPU is not the current device (as in tests that pass the device without binding it)
// trains, traces and profiles, and leaves the current device as it found it. Its parameters after
// the steps match the same steps on GPU 0; that part needs 2 GPUs and says so on one. The step
// profile's gradient ranges come in buffer order, apart, each parameter slot once (its bucket
// model reads them so), which one GPU checks too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "runtime/rank/gpu_binding.h"

#if DTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "runtime/cuda/cuda_check.h"
#include "runtime/memory/buffer.h"
#include "tests/support/test_seed.h"
#include "train/engine/cuda/gpu_step_profiler.h"
#include "train/engine/cuda/gpu_step_trace.h"
#include "train/engine/cuda/gpu_train_step.h"
#include "train/observe/timeline_events.h"
#endif

namespace dtrain::train {
namespace {

#if DTRAIN_WITH_CUDA
constexpr int kSteps = 3;

struct StepRun {
  std::vector<float> params;
  StepPhases phases;
  size_t slots = 0;
  size_t spans = 0;
  int current_after = -1;
};

// kSteps on `device` (traced and profiled) with GPU 0 current throughout, from the same images.
StepRun run_on(int device, const runtime::Buffer& images, const runtime::Buffer& labels, int batch, int side) {
  DTRAIN_CUDA_CHECK(cudaSetDevice(0));
  cuda::GpuStepOptions o;
  o.model.small_input = true;
  o.model.blocks_per_stage = {1, 1};
  o.model.bottleneck = false;
  o.model.width = 8;
  o.model.num_classes = 10;
  o.model.in_channels = 3;
  o.model.seed = 11;
  o.allow_tf32 = false;
  o.batch = batch;
  o.height = o.width = side;
  o.sgd = SgdOptions{0.9, 1e-4, false};
  StepRun out;
  {
    cuda::GpuTrainStep step(o, nullptr, device);
    TimelineRecorder recorder({1, kSteps}, 1000);
    cuda::GpuStepTrace trace(device);
    cuda::GpuStepProfiler profiler;
    for (long s = 1; s <= kSteps; ++s) {
      trace.begin_step(&recorder, s);
      if (s == kSteps) step.profile_next_run(&profiler);
      step.run(static_cast<const uint8_t*>(images.data()), static_cast<const int32_t*>(labels.data()), 0.1f, {},
               &trace);
    }
    profiler.resolve(&out.phases);
    trace.resolve(step.context().stream());
    step.synchronize();
    step.model().sync_to_host();
    models::ParameterSet& p = step.model().parameters();
    out.params.assign(p.params_flat(), p.params_flat() + p.flat_size());
    out.slots = step.model().device_parameters().layout().slots().size();
    out.spans = recorder.spans().size();
    DTRAIN_CUDA_CHECK(cudaGetDevice(&out.current_after));
  }
  return out;
}

TEST(GpuStepPlacement, TrainsTracesAndProfilesOnAGpuThatIsNotCurrent) {
  const size_t gpus = runtime::detail::runtime_visible_gpus().size();
  if (gpus == 0) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
  const int batch = 4, side = 12;
  std::mt19937_64 rng(test::random_seed());
  runtime::Buffer images(runtime::MemoryKind::kPinnedHost, size_t{3} * batch * side * side);
  runtime::Buffer labels(runtime::MemoryKind::kPinnedHost, sizeof(int32_t) * batch);
  for (size_t i = 0; i < images.bytes(); ++i) static_cast<uint8_t*>(images.data())[i] = uint8_t(rng() % 256);
  for (int i = 0; i < batch; ++i) static_cast<int32_t*>(labels.data())[i] = static_cast<int32_t>(rng() % 10);

  const StepRun on0 = run_on(0, images, labels, batch, side);
  // The profile of the last step: every parameter slot once, in buffer order, apart.
  ASSERT_EQ(on0.phases.gradients.size(), on0.slots);
  int64_t end = 0;
  for (const GradientReady& g : on0.phases.gradients) {
    EXPECT_GE(g.offset, end) << "gradient ranges in buffer order, apart";
    end = g.offset + g.elements;
  }
  EXPECT_EQ(on0.spans, size_t{4} * kSteps) << "H2D copy, forward, backward and SGD update of each step";
  if (gpus < 2) {
    // Not a skip: DTRAIN_REQUIRE_GPU=1 would fail one-GPU machines, which checked what they can.
    std::printf("  one GPU visible: the step on a GPU that is not current needs 2 (checked the profile only)\n");
    return;
  }

  const int other = static_cast<int>(gpus) - 1;
  const StepRun elsewhere = run_on(other, images, labels, batch, side);
  EXPECT_EQ(elsewhere.current_after, 0) << "the step left GPU " << elsewhere.current_after << " current";
  EXPECT_EQ(elsewhere.spans, on0.spans);
  ASSERT_EQ(elsewhere.phases.gradients.size(), on0.phases.gradients.size());
  ASSERT_EQ(elsewhere.params.size(), on0.params.size());
  // The same steps on another GPU of the model: cuDNN may choose other algorithms (fp32, no TF32),
  // a few 1e-6 relative per layer; 1e-3 with a floor of 1e-3 on the magnitude, as the GPU
  // synchronized-BN test. A step on the wrong device would have thrown instead.
  double worst = 0;
  for (size_t i = 0; i < on0.params.size(); ++i) {
    worst = std::max(worst, std::fabs(double(elsewhere.params[i]) - on0.params[i]) /
                                std::max(1e-3, std::fabs(double(on0.params[i]))));
  }
  std::printf("  GPU %d (GPU 0 current) vs GPU 0 after %d steps: worst relative parameter difference %.2e\n", other,
              kSteps, worst);
  EXPECT_LE(worst, 1e-3);
}
#else
TEST(GpuStepPlacement, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
}
#endif

}  // namespace
}  // namespace dtrain::train
