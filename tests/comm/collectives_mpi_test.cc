// The collective matrix on the CPU path: backend x dtype x in-place/out-of-place x awkward counts,
// under mpirun with 1 to 4 ranks, against a float64 reference on fresh random inputs.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>

#include "comm/backends/factory.h"
#include "comm/backends/hierarchical_communicator.h"
#include "comm/backends/mpi_communicator.h"
#include "comm/backends/mpi_ring_communicator.h"
#include "runtime/base/error.h"
#include "runtime/io/fingerprint.h"
#include "runtime/mpi/mpi_agreement.h"
#include "runtime/rank/rank_context.h"
#include "tests/comm/collective_reference.h"
#include "tests/support/mpi_world.h"

namespace dtrain::comm {
namespace {

using test::decode_one;
using test::encode;
using test::random_values;
using test::tolerance;

using test::world_rank;
using test::world_size;

std::vector<size_t> awkward_counts() {
  const size_t n = static_cast<size_t>(world_size());
  return {0, 1, 2, 3, n - 1, 7919, 1000003, (size_t{1} << 20) + 3};
}

// "mpi-ring", "mpi", "hierarchical" with k ranks per simulated node (uneven allowed), or with
// k = 0 the nodes MPI reports: one on a single host, several under cluster/sim or a real cluster.
struct BackendSpec {
  std::string name;
  int ranks_per_node = 0;
};

std::string spec_label(const BackendSpec& s) {
  return s.ranks_per_node ? s.name + "_rpn" + std::to_string(s.ranks_per_node) : s.name;
}

struct Fixture {
  std::unique_ptr<runtime::RankContext> ctx;
  std::unique_ptr<Communicator> comm;
};

Fixture make(const BackendSpec& spec) {
  Fixture f;
  if (spec.ranks_per_node > 0) {
    f.ctx = std::make_unique<runtime::RankContext>(MPI_COMM_WORLD, runtime::NodeLayout{spec.ranks_per_node, true});
  } else {
    f.ctx = std::make_unique<runtime::RankContext>(MPI_COMM_WORLD, runtime::NodeLayout{});
    // The multi-node runs (tests/cluster) say how many nodes they launched on, so a launch that
    // quietly landed on one host cannot pass as a cross-node test.
    if (const char* nodes = std::getenv("DTRAIN_TEST_EXPECT_NODES")) {
      EXPECT_EQ(f.ctx->topology().node_count, std::atoi(nodes)) << "nodes seen by MPI";
    }
  }
  RingTuning tuning;
  tuning.segment_bytes = 64 * 1024;  // several segments per chunk even at moderate counts
  if (spec.name == "mpi-ring") f.comm = std::make_unique<MpiRingCommunicator>(f.ctx->world(), tuning);
  if (spec.name == "mpi") f.comm = std::make_unique<MpiCommunicator>(f.ctx->world());
  if (spec.name == "hierarchical") f.comm = std::make_unique<HierarchicalCommunicator>(*f.ctx, false, tuning);
  return f;
}

using Param = std::tuple<BackendSpec, DType, bool>;

class Collectives : public testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    std::tie(spec_, dtype_, in_place_) = GetParam();
    fixture_ = make(spec_);
    seed_ = test::shared_seed(MPI_COMM_WORLD);
    rank_ = world_rank();
    size_ = world_size();
  }

  // Checks every element of `got` (n elements) against exact[i] (scaled), and that all ranks agree.
  void expect_close(const unsigned char* got, const std::vector<double>& exact, const std::vector<double>& magnitude,
                    double scale, const std::string& what) {
    size_t wrong = 0;
    size_t first = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
      const double want = exact[i] * scale;
      const double diff = std::fabs(decode_one(got, i, dtype_) - want);
      if (!(diff <= tolerance(want, magnitude[i] * std::fabs(scale), dtype_))) {
        if (wrong++ == 0) first = i;
      }
    }
    EXPECT_EQ(wrong, 0u) << what << ": first wrong element " << first << ": got " << decode_one(got, first, dtype_)
                         << ", want " << exact[first] * scale << " (seed " << seed_ << ")";
    EXPECT_TRUE(runtime::same_on_every_rank(MPI_COMM_WORLD,
                                            runtime::fingerprint(got, exact.size() * runtime::dtype_size(dtype_))))
        << what << ": ranks hold different results";
  }

  std::string label(const char* op, size_t count) const {
    return std::string(op) + " " + spec_label(spec_) + " " + runtime::dtype_name(dtype_) +
           (in_place_ ? " in-place" : "") + " count=" + std::to_string(count) + " ranks=" + std::to_string(size_);
  }

  BackendSpec spec_;
  DType dtype_ = DType::kF32;
  bool in_place_ = false;
  Fixture fixture_;
  uint64_t seed_ = 0;
  int rank_ = 0;
  int size_ = 1;
};

TEST_P(Collectives, AllReduceSumAndAverage) {
  const size_t esize = runtime::dtype_size(dtype_);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    for (size_t count : awkward_counts()) {
      std::vector<double> exact(count, 0.0), magnitude(count, 0.0);
      std::vector<unsigned char> mine;
      for (int r = 0; r < size_; ++r) {
        const std::vector<double> v = random_values(seed_, r, static_cast<int>(count), count, dtype_);
        for (size_t i = 0; i < count; ++i) {
          exact[i] += v[i];
          magnitude[i] += std::fabs(v[i]);
        }
        if (r == rank_) mine = encode(v, dtype_);
      }
      std::vector<unsigned char> out(count * esize + 1, 0xEE);  // +1: a guard byte
      const void* send = mine.data();
      if (in_place_) {
        std::memcpy(out.data(), mine.data(), count * esize);
        send = out.data();
      }
      fixture_.comm->all_reduce(send, out.data(), count, dtype_, op).wait();
      const double scale = op == ReduceOp::kAverage ? 1.0 / size_ : 1.0;
      expect_close(out.data(), exact, magnitude, scale,
                   label(op == ReduceOp::kSum ? "all_reduce sum" : "all_reduce avg", count));
      EXPECT_EQ(out.back(), 0xEE) << label("all_reduce", count) << ": wrote past the end";
    }
  }
}

TEST_P(Collectives, ReduceScatter) {
  const size_t esize = runtime::dtype_size(dtype_);
  for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{7919}, size_t{262147}}) {
    const size_t total = count * static_cast<size_t>(size_);
    std::vector<double> exact(count, 0.0), magnitude(count, 0.0);
    std::vector<unsigned char> mine;
    for (int r = 0; r < size_; ++r) {
      const std::vector<double> v = random_values(seed_, r, 77, total, dtype_);
      for (size_t i = 0; i < count; ++i) {
        exact[i] += v[static_cast<size_t>(rank_) * count + i];
        magnitude[i] += std::fabs(v[static_cast<size_t>(rank_) * count + i]);
      }
      if (r == rank_) mine = encode(v, dtype_);
    }
    std::vector<unsigned char> separate(count * esize + 1, 0xEE);
    unsigned char* recv = in_place_ ? mine.data() + static_cast<size_t>(rank_) * count * esize : separate.data();
    fixture_.comm->reduce_scatter(mine.data(), recv, count, dtype_, ReduceOp::kSum).wait();
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      if (!(std::fabs(decode_one(recv, i, dtype_) - exact[i]) <= tolerance(exact[i], magnitude[i], dtype_))) ++wrong;
    }
    EXPECT_EQ(wrong, 0u) << label("reduce_scatter", count) << " (seed " << seed_ << ")";
    if (!in_place_) {
      EXPECT_EQ(separate.back(), 0xEE) << label("reduce_scatter", count) << ": wrote past the end";
    }
  }
}

TEST_P(Collectives, AllGatherAndBroadcastAreExact) {
  const size_t esize = runtime::dtype_size(dtype_);
  for (size_t count : awkward_counts()) {
    if (count > 100000 && size_ > 2) count = 100003;  // all-gather output grows with the world
    std::vector<unsigned char> expected;
    for (int r = 0; r < size_; ++r) {
      const std::vector<unsigned char> block = encode(random_values(seed_, r, 5, count, dtype_), dtype_);
      expected.insert(expected.end(), block.begin(), block.end());
    }
    std::vector<unsigned char> gathered(expected.size() + 1, 0xEE);
    std::vector<unsigned char> mine(expected.begin() + static_cast<long>(rank_ * count * esize),
                                    expected.begin() + static_cast<long>((rank_ + 1) * count * esize));
    const void* send = mine.data();
    if (in_place_) {
      std::memcpy(gathered.data() + rank_ * count * esize, mine.data(), mine.size());
      send = gathered.data() + rank_ * count * esize;
    }
    fixture_.comm->all_gather(send, gathered.data(), count, dtype_).wait();
    EXPECT_EQ(std::memcmp(gathered.data(), expected.data(), expected.size()), 0) << label("all_gather", count);
    EXPECT_EQ(gathered.back(), 0xEE) << label("all_gather", count);

    const int root = size_ - 1;
    std::vector<unsigned char> buffer =
        rank_ == root
            ? std::vector<unsigned char>(expected.begin(), expected.begin() + static_cast<long>(count * esize))
            : std::vector<unsigned char>(count * esize, 0xAB);
    fixture_.comm->broadcast(buffer.data(), count, dtype_, root).wait();
    EXPECT_EQ(std::memcmp(buffer.data(), expected.data(), count * esize), 0) << label("broadcast", count);
  }
}

// Behaviour that does not depend on dtype or placement: one run per backend.
class CommunicatorBehaviour : public testing::TestWithParam<BackendSpec> {
 protected:
  void SetUp() override {
    fixture_ = make(GetParam());
    rank_ = world_rank();
    size_ = world_size();
  }
  Fixture fixture_;
  int rank_ = 0;
  int size_ = 1;
};

TEST_P(CommunicatorBehaviour, ManyOutstandingCallsCompleteInOrder) {
  std::vector<std::vector<float>> buffers(8, std::vector<float>(1001));
  for (size_t b = 0; b < buffers.size(); ++b) {
    for (size_t i = 0; i < buffers[b].size(); ++i) buffers[b][i] = static_cast<float>(b * 1000 + i + rank_);
  }
  std::vector<Work> works;
  for (auto& b : buffers)
    works.push_back(fixture_.comm->all_reduce(b.data(), b.data(), b.size(), DType::kF32, ReduceOp::kSum));
  for (Work& w : works) w.wait();
  const double rank_sum = size_ * (size_ - 1) / 2.0;
  for (size_t b = 0; b < buffers.size(); ++b) {
    for (size_t i = 0; i < buffers[b].size(); i += 97) {
      EXPECT_EQ(buffers[b][i], static_cast<float>(size_ * (b * 1000.0 + i) + rank_sum))
          << "buffer " << b << " element " << i;
    }
  }
}

TEST_P(CommunicatorBehaviour, MismatchedCallsFailOnEveryRankAndLeaveTheCommunicatorUsable) {
  if (size_ == 1) GTEST_SKIP() << "a mismatch needs two ranks";
  std::vector<float> data(64, 1.0f);
  const size_t count = rank_ == 0 ? 33 : 32;
  try {
    fixture_.comm->all_reduce(data.data(), data.data(), count, DType::kF32, ReduceOp::kSum).wait();
    ADD_FAILURE() << "no error for mismatched counts";
  } catch (const runtime::Error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("rank 0: all_reduce(count=33, fp32, sum"), std::string::npos) << text;
    EXPECT_NE(text.find("all_reduce(count=32, fp32, sum"), std::string::npos) << text;
  }
  const DType dtype = rank_ == size_ - 1 ? DType::kBF16 : DType::kF32;
  EXPECT_THROW(fixture_.comm->all_reduce(data.data(), data.data(), 16, dtype, ReduceOp::kSum).wait(), runtime::Error);
  for (float& v : data) v = 1.0f;  // untouched by the failed calls, and the communicator still works
  fixture_.comm->all_reduce(data.data(), data.data(), 64, DType::kF32, ReduceOp::kSum).wait();
  EXPECT_EQ(data[63], static_cast<float>(size_));
}

TEST_P(CommunicatorBehaviour, BadArgumentsAreUsageErrors) {
  std::vector<int32_t> ints(4);
  EXPECT_THROW(fixture_.comm->all_reduce(ints.data(), ints.data(), 4, DType::kI32, ReduceOp::kSum),
               runtime::UsageError);
  EXPECT_THROW(fixture_.comm->broadcast(ints.data(), 1, DType::kF32, size_), runtime::UsageError);
  EXPECT_THROW(fixture_.comm->all_reduce(nullptr, ints.data(), 1, DType::kF32, ReduceOp::kSum), runtime::UsageError);
}

// Send and receive buffers either are one buffer (in place: the same pointer, or for all_gather and
// reduce_scatter this rank's block of the larger one) or do not overlap: a partial overlap reads
// input the call has already overwritten, so it is refused before anything is sent.
TEST_P(CommunicatorBehaviour, PartiallyOverlappingBuffersAreUsageErrors) {
  const size_t n = static_cast<size_t>(size_);
  std::vector<float> buf(4 * n + 8, 1.0f);
  auto expect_overlap_error = [](auto&& call, const char* what) {
    try {
      call();
      ADD_FAILURE() << what << ": accepted";
    } catch (const runtime::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("overlap"), std::string::npos) << what << ": " << e.what();
    }
  };
  expect_overlap_error([&] { fixture_.comm->all_reduce(buf.data(), buf.data() + 1, 4, DType::kF32, ReduceOp::kSum); },
                       "all_reduce recv = send + 1");
  expect_overlap_error([&] { fixture_.comm->all_reduce(buf.data() + 3, buf.data(), 4, DType::kF32, ReduceOp::kSum); },
                       "all_reduce send = recv + 3");
  expect_overlap_error([&] { fixture_.comm->all_gather(buf.data() + 1, buf.data(), 4, DType::kF32); },
                       "all_gather send inside recv, off its blocks");
  expect_overlap_error(
      [&] { fixture_.comm->reduce_scatter(buf.data(), buf.data() + 2, 4, DType::kF32, ReduceOp::kSum); },
      "reduce_scatter recv inside send, off its blocks");
  // Still fine: the same buffer, this rank's block, and neighbours that only touch.
  fixture_.comm->all_reduce(buf.data(), buf.data(), 4, DType::kF32, ReduceOp::kSum).wait();
  fixture_.comm->all_reduce(buf.data(), buf.data() + 4, 4, DType::kF32, ReduceOp::kSum).wait();
  fixture_.comm->all_gather(buf.data() + 4 * static_cast<size_t>(rank_), buf.data(), 4, DType::kF32).wait();
  fixture_.comm->reduce_scatter(buf.data(), buf.data() + 4 * static_cast<size_t>(rank_), 4, DType::kF32, ReduceOp::kSum)
      .wait();
}

void PrintTo(const BackendSpec& spec, std::ostream* out) {
  *out << spec_label(spec);
}

std::string identifier(std::string name) {
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

std::string param_name(const testing::TestParamInfo<Param>& info) {
  return identifier(spec_label(std::get<0>(info.param)) + "_" + runtime::dtype_name(std::get<1>(info.param)) +
                    (std::get<2>(info.param) ? "_inplace" : "_outofplace"));
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, Collectives,
    testing::Combine(testing::Values(BackendSpec{"mpi-ring", 0}, BackendSpec{"mpi", 0}, BackendSpec{"hierarchical", 0},
                                     BackendSpec{"hierarchical", 1}, BackendSpec{"hierarchical", 2}),
                     testing::Values(DType::kF32, DType::kF16, DType::kBF16), testing::Bool()),
    param_name);

INSTANTIATE_TEST_SUITE_P(Backends, CommunicatorBehaviour,
                         testing::Values(BackendSpec{"mpi-ring", 0}, BackendSpec{"mpi", 0},
                                         BackendSpec{"hierarchical", 0}, BackendSpec{"hierarchical", 1},
                                         BackendSpec{"hierarchical", 2}),
                         [](const testing::TestParamInfo<BackendSpec>& p) { return identifier(spec_label(p.param)); });

// Native 16-bit sums are NCCL's: every other backend refuses them at construction, naming itself.
TEST(Factory, NativeSixteenBitSumsNeedTheNcclBackend) {
  const runtime::RankContext ctx(MPI_COMM_WORLD, runtime::NodeLayout{});
  for (Backend b : {Backend::kMpiRing, Backend::kMpi, Backend::kHierarchical}) {
    try {
      make_communicator(b, ctx, false, DType::kF32, SixteenBitSum::kNative);
      ADD_FAILURE() << backend_name(b) << " accepted native 16-bit sums";
    } catch (const runtime::UsageReportedElsewhere&) {
      // Another rank reports it (one line per problem for the job); this rank only ends.
    } catch (const runtime::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(backend_name(b)), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("native 16-bit sums"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace dtrain::comm
