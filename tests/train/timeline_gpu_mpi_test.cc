// The GPU side of the timeline: GpuTrainStep's spans from CUDA events on their
// streams, turned into host time once after the range. For each recorded step: one H2D copy on the
// copy stream, forward, backward and SGD update on the compute stream, in that order, and (with 2
// or more ranks) every gradient bucket's all-reduce on the comm stream, each beginning after
// backward began and ending before the SGD update began: inside the step as the GPU ran it. All
// times lie between the first step's queueing and the resolve. A step queued after the range adds
// nothing. The ranks may share one GPU: each is its own simulated node (DTRAIN_RANKS_PER_NODE=1
// semantics) on the staged mpi-ring, so one GPU is enough. Skips, saying why, without a GPU.
// Inside each bucket, the phases the staged device path reports (comm/call_trace.h): every
// piece's D2H, host ring and H2D, in that order, their bytes adding up to the bucket's; with the
// hierarchical backend (each rank its own node) inside its "cross-node ring".
// The step profile (gpu_step_profiler.h) of the same step: every parameter's gradient range once,
// tiling the flat buffer in backward order, each ready after the one before it and inside
// backward, on 1 rank (no all-reduce) and more.
#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "comm/backends/factory.h"
#include "comm/gradient_sync/bucket_plan.h"
#include "runtime/memory/buffer.h"
#include "runtime/rank/gpu_binding.h"
#include "runtime/rank/rank_context.h"
#include "tests/support/mpi_world.h"
#include "train/observe/timeline_events.h"

#if DTRAIN_WITH_CUDA
#include "train/engine/cuda/gpu_step_profiler.h"
#include "train/engine/cuda/gpu_step_trace.h"
#include "train/engine/cuda/gpu_train_step.h"
#endif

namespace dtrain::train {
namespace {

using test::world_rank;
using test::world_size;

// Events on different streams are compared: allow their timer's resolution and a little more.
constexpr double kTolerance = 5e-6;  // seconds

#if DTRAIN_WITH_CUDA
// The host ring is timed by the host clock, the copies by events turned into host time after the
// wait for the GPU returned, which can place them a little late: comparisons across the two clocks
// allow this much.
constexpr double kAcrossClocks = 200e-6;  // seconds

// `phases`: the spans of bucket `bucket`'s phases in its step (see the file's comment).
void expect_bucket_phases(const TimelineSpan& bucket, const std::vector<TimelineSpan>& phases, bool hierarchical) {
  const std::string where = "bucket " + std::to_string(bucket.bucket) + " of step " + std::to_string(bucket.step);
  std::map<std::string, std::map<int, TimelineSpan>> by_name;  // name -> piece -> span
  for (const TimelineSpan& p : phases) {
    EXPECT_EQ(p.track, TimelineTrack::kComm) << where << ": " << p.name;
    EXPECT_TRUE(by_name[p.name].emplace(p.piece, p).second) << where << ": " << p.name << " piece " << p.piece;
    EXPECT_GE(p.begin + kAcrossClocks, bucket.begin) << where << ": " << p.name << " begins before the bucket";
    EXPECT_LE(p.end, bucket.end + kAcrossClocks) << where << ": " << p.name << " ends after the bucket";
  }
  std::set<std::string> names, expected = {"D2H", "host ring", "H2D"};
  if (hierarchical) expected.insert("cross-node ring");
  for (const auto& [name, spans] : by_name) names.insert(name);
  ASSERT_EQ(names, expected) << where;
  const size_t pieces = by_name["D2H"].size();
  ASSERT_EQ(by_name["host ring"].size(), pieces) << where;
  ASSERT_EQ(by_name["H2D"].size(), pieces) << where;
  int64_t bytes = 0;
  for (int k = 0; k < static_cast<int>(pieces); ++k) {
    for (const char* name : {"D2H", "host ring", "H2D"}) ASSERT_EQ(by_name[name].count(k), 1u) << where << ": " << name;
    const TimelineSpan& out = by_name["D2H"][k];
    const TimelineSpan& ring = by_name["host ring"][k];
    const TimelineSpan& back = by_name["H2D"][k];
    EXPECT_LE(out.end, ring.begin + kAcrossClocks) << where << " piece " << k << ": host ring before its D2H ended";
    EXPECT_LE(ring.end, back.begin + kAcrossClocks) << where << " piece " << k << ": H2D before its host ring ended";
    EXPECT_TRUE(out.bytes == ring.bytes && ring.bytes == back.bytes) << where << " piece " << k;
    bytes += ring.bytes;
    if (hierarchical) {
      const TimelineSpan& cross = by_name["cross-node ring"][-1];
      EXPECT_GE(out.begin + kTolerance, cross.begin) << where << " piece " << k << " begins before the ring";
      EXPECT_LE(back.end, cross.end + kTolerance) << where << " piece " << k << " ends after the ring";
    }
  }
  EXPECT_EQ(bytes, bucket.bytes) << where << ": the pieces do not add up to the bucket";
  if (hierarchical) {
    EXPECT_EQ(by_name["cross-node ring"][-1].bytes, bucket.bytes) << where;
  }
}
#endif

class TimelineOnGpu : public testing::TestWithParam<comm::Backend> {};

TEST_P(TimelineOnGpu, BucketAllReducesLieInsideTheStepOnTheGpu) {
#if DTRAIN_WITH_CUDA
  int gpus = static_cast<int>(runtime::detail::runtime_visible_gpus().size());
  MPI_Allreduce(MPI_IN_PLACE, &gpus, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (gpus == 0) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
  setenv("DTRAIN_MPI_DEVICE_POINTERS", "stage", 1);  // ranks may share a GPU: the host ring, staged
  const runtime::RankContext ctx(MPI_COMM_WORLD, runtime::NodeLayout{1, false});
  const runtime::GpuBinding binding = runtime::bind_gpu(ctx, true);
  const bool hierarchical = GetParam() == comm::Backend::kHierarchical;
  const std::unique_ptr<comm::Communicator> comm = comm::make_communicator(GetParam(), ctx, true);
  cuda::GpuStepOptions o;
  o.model.small_input = true;
  o.model.blocks_per_stage = {1, 1, 1};
  o.model.bottleneck = false;
  o.model.width = 48;
  o.model.num_classes = 10;
  o.model.in_channels = 3;
  o.batch = 16;
  o.height = o.width = 32;
  o.buckets = {size_t{256} << 10, 0};  // about 0.9 M parameters (3.6 MB): 14 buckets or so
  const int device = binding.device.index;
  cuda::GpuTrainStep step(o, comm.get(), device);
  const size_t pixels = size_t{3} * o.batch * o.height * o.width;
  runtime::Buffer images(runtime::MemoryKind::kPinnedHost, pixels);
  runtime::Buffer labels(runtime::MemoryKind::kPinnedHost, sizeof(int32_t) * o.batch);
  std::mt19937_64 rng(7 + static_cast<uint64_t>(world_rank()));
  for (size_t i = 0; i < pixels; ++i) static_cast<uint8_t*>(images.data())[i] = static_cast<uint8_t>(rng() % 256);
  for (int i = 0; i < o.batch; ++i) static_cast<int32_t*>(labels.data())[i] = static_cast<int32_t>(rng() % 10);
  const auto* pixels_in = static_cast<const uint8_t*>(images.data());
  const auto* labels_in = static_cast<const int32_t*>(labels.data());

  step.run(pixels_in, labels_in, 0.01f);  // a warm-up step outside the range
  step.synchronize();
  TimelineRecorder recorder({2, 4}, 10000);
  cuda::GpuStepTrace trace(device);
  const double queued = runtime::steady_seconds();
  for (long s = 2; s <= 4; ++s) {
    trace.begin_step(&recorder, s);
    step.run(pixels_in, labels_in, 0.01f, {}, &trace);
  }
  step.run(pixels_in, labels_in, 0.01f);  // after the range: records nothing
  trace.resolve(step.context().stream());
  const double resolved = runtime::steady_seconds();
  step.synchronize();

  const size_t count = static_cast<size_t>(step.model().device_parameters().count());
  const size_t buckets = step.gradient_buckets();  // 1 rank: none
  EXPECT_TRUE(world_size() == 1 || buckets >= 4) << buckets << " buckets";
  EXPECT_EQ(recorder.dropped(), 0u);
  std::map<long, std::map<std::string, std::vector<TimelineSpan>>> by_step;
  std::map<std::pair<long, long>, std::vector<TimelineSpan>> bucket_phases;  // (step, bucket) -> its phases
  for (const TimelineSpan& s : recorder.spans()) {
    EXPECT_LE(queued, s.begin) << s.name << " step " << s.step;
    EXPECT_LE(s.begin, s.end) << s.name << " step " << s.step;
    EXPECT_LE(s.end, resolved) << s.name << " step " << s.step;
    if (s.bucket >= 0 && std::string(s.name) != "all-reduce") {
      bucket_phases[{s.step, s.bucket}].push_back(s);
      continue;
    }
    const TimelineTrack expected = std::string(s.name) == "H2D copy"     ? TimelineTrack::kCopyStream
                                   : std::string(s.name) == "all-reduce" ? TimelineTrack::kComm
                                                                         : TimelineTrack::kComputeStream;
    EXPECT_EQ(s.track, expected) << s.name;
    by_step[s.step][s.name].push_back(s);
  }
  size_t whole = 0;  // the spans but the buckets' phases
  for (const auto& [step_of, phases] : by_step) {
    for (const auto& [name, spans] : phases) whole += spans.size();
  }
  ASSERT_EQ(whole, 3 * (4 + buckets));
  for (long s = 2; s <= 4; ++s) {
    auto& phases = by_step[s];
    for (const char* name : {"H2D copy", "forward", "backward", "SGD update"}) {
      ASSERT_EQ(phases[name].size(), 1u) << name << " step " << s;
    }
    const TimelineSpan& copy = phases["H2D copy"][0];
    const TimelineSpan& forward = phases["forward"][0];
    const TimelineSpan& backward = phases["backward"][0];
    const TimelineSpan& sgd = phases["SGD update"][0];
    EXPECT_EQ(copy.bytes, static_cast<int64_t>(pixels + sizeof(int32_t) * o.batch));
    EXPECT_LE(copy.end, forward.begin + kTolerance) << "the compute stream waits for its input, step " << s;
    EXPECT_LE(forward.end, backward.begin + kTolerance) << "step " << s;
    EXPECT_LE(backward.end, sgd.begin + kTolerance) << "step " << s;
    ASSERT_EQ(phases["all-reduce"].size(), buckets) << "step " << s;
    int64_t bytes = 0;
    // Buckets start in the order backward finishes them, which is not their index order (a
    // bucket's last gradient can come before the previous bucket's): each one once, in any order.
    std::set<long> seen;
    for (size_t i = 0; i < buckets; ++i) {
      const TimelineSpan& b = phases["all-reduce"][i];
      EXPECT_TRUE(b.bucket >= 0 && b.bucket < static_cast<long>(buckets)) << "bucket " << b.bucket << ", step " << s;
      EXPECT_TRUE(seen.insert(b.bucket).second) << "bucket " << b.bucket << " twice in step " << s;
      EXPECT_GE(b.begin + kTolerance, backward.begin) << "bucket " << i << " of step " << s << " began before backward";
      EXPECT_LE(b.end, sgd.begin + kTolerance) << "bucket " << i << " of step " << s << " ended after the update began";
      if (i > 0) {
        EXPECT_LE(phases["all-reduce"][i - 1].end, b.begin + kTolerance) << "one comm stream, in order";
      }
      bytes += b.bytes;
      expect_bucket_phases(b, bucket_phases[{s, b.bucket}], hierarchical);
    }
    if (buckets > 0) {
      EXPECT_EQ(bytes, static_cast<int64_t>(count * sizeof(float))) << "step " << s;
    }
    if (world_rank() == 0) {
      std::printf(
          "step %ld on the GPU: H2D %.1f us, forward %.1f us, backward %.1f us, %zu bucket all-reduces "
          "from %.1f us after backward began to %.1f us before the update, SGD %.1f us\n",
          s, 1e6 * (copy.end - copy.begin), 1e6 * (forward.end - forward.begin), 1e6 * (backward.end - backward.begin),
          buckets, buckets ? 1e6 * (phases["all-reduce"][0].begin - backward.begin) : 0.0,
          buckets ? 1e6 * (sgd.begin - phases["all-reduce"].back().end) : 0.0, 1e6 * (sgd.end - sgd.begin));
    }
  }
#else
  GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
#endif
}

INSTANTIATE_TEST_SUITE_P(Backends, TimelineOnGpu,
                         testing::Values(comm::Backend::kMpiRing, comm::Backend::kHierarchical),
                         [](const testing::TestParamInfo<comm::Backend>& p) {
                           return p.param == comm::Backend::kMpiRing ? std::string("mpi_ring")
                                                                     : std::string("hierarchical");
                         });

TEST(StepProfileOnGpu, EveryGradientRangeOnceInsideBackward) {
#if DTRAIN_WITH_CUDA
  int gpus = static_cast<int>(runtime::detail::runtime_visible_gpus().size());
  MPI_Allreduce(MPI_IN_PLACE, &gpus, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (gpus == 0) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
  setenv("DTRAIN_MPI_DEVICE_POINTERS", "stage", 1);
  const runtime::RankContext ctx(MPI_COMM_WORLD, runtime::NodeLayout{1, false});
  const runtime::GpuBinding binding = runtime::bind_gpu(ctx, true);
  const std::unique_ptr<comm::Communicator> comm = comm::make_communicator(comm::Backend::kMpiRing, ctx, true);
  cuda::GpuStepOptions o;
  o.model.small_input = true;
  o.model.blocks_per_stage = {1, 1};
  o.model.bottleneck = false;
  o.model.width = 16;
  o.model.num_classes = 10;
  o.batch = 8;
  o.height = o.width = 16;
  cuda::GpuTrainStep step(o, comm.get(), binding.device.index);
  runtime::Buffer images(runtime::MemoryKind::kPinnedHost, size_t{3} * o.batch * o.height * o.width);
  runtime::Buffer labels(runtime::MemoryKind::kPinnedHost, sizeof(int32_t) * o.batch);
  std::memset(images.data(), 77, images.bytes());
  std::memset(labels.data(), 0, labels.bytes());
  const auto* pixels_in = static_cast<const uint8_t*>(images.data());
  const auto* labels_in = static_cast<const int32_t*>(labels.data());
  step.run(pixels_in, labels_in, 0.01f);  // warm-up
  cuda::GpuStepProfiler profiler;
  StepPhases phases;
  for (int i = 0; i < 2; ++i) {  // the second reuses the first one's events
    step.profile_next_run(&profiler);
    step.run(pixels_in, labels_in, 0.01f);
    profiler.resolve(&phases);
  }
  step.run(pixels_in, labels_in, 0.01f);  // not profiled: the profiler is disarmed after one step
  step.synchronize();
  ASSERT_EQ(phases.gradients.size(), step.model().device_parameters().layout().slots().size());
  EXPECT_GT(phases.forward, 0);
  EXPECT_GT(phases.backward, 0);
  EXPECT_GT(phases.optimizer, 0);
  int64_t end = 0;
  double before = 0;
  std::set<int64_t> offsets;
  for (const GradientReady& g : phases.gradients) {
    EXPECT_GE(g.offset, end) << "ranges in backward order, apart";
    EXPECT_TRUE(offsets.insert(g.offset).second) << "range at " << g.offset << " twice";
    EXPECT_GE(g.ready + kTolerance, before) << "one stream: each range after the one before it";
    EXPECT_LE(g.ready, phases.backward + kTolerance) << "range at " << g.offset << " after backward";
    end = g.offset + g.elements;
    before = g.ready;
  }
  EXPECT_LE(end, step.model().device_parameters().count());
  if (world_rank() == 0) {
    std::printf("profiled on the GPU: forward %.1f us, backward %.1f us, update %.1f us, %zu ranges, last at %.1f us\n",
                1e6 * phases.forward, 1e6 * phases.backward, 1e6 * phases.optimizer, phases.gradients.size(),
                1e6 * before);
  }
#else
  GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
#endif
}

}  // namespace
}  // namespace dtrain::train
