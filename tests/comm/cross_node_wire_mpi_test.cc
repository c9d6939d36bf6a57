// The cross-node wire format (gradient_wire_dtype) on fp32 data, host buffers, under mpirun with 1
// to 4 ranks on simulated nodes, against a float64 reference; and what the factory's `auto`
// choices (backend, wire) say and refuse.
#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>

#include <cmath>
#include <memory>
#include <string>
#include <tuple>

#include "comm/backends/factory.h"
#include "runtime/base/error.h"
#include "runtime/io/fingerprint.h"
#include "runtime/mpi/mpi_agreement.h"
#include "runtime/rank/rank_context.h"
#include "tests/comm/collective_reference.h"
#include "tests/support/mpi_world.h"

namespace dtrain::comm {
namespace {

using test::world_rank;
using test::world_size;

bool representable(float v, DType wire) {
  std::vector<unsigned char> narrow = test::encode(std::vector<double>{v}, wire);
  return test::decode_one(narrow.data(), 0, wire) == static_cast<double>(v);
}

// backend, ranks per simulated node, wire format.
using WireParam = std::tuple<std::string, int, DType>;

// With k >= 2 nodes the values cross the network as 16 bits, added in fp32, each partial sum
// rounded once per hop. hierarchical: every node's sum is narrowed, then k-1 hops: k roundings at
// most. mpi-ring (flat): every rank's value is narrowed, then n-1 hops over all n ranks: n
// roundings at most. Each rounding errs by at most u x (a partial sum <= the sum of |terms|), so
// the error is within roundings x u x sum|terms|; every sum is representable in the wire format.
// On one node nothing is narrowed.
class CrossNodeWire : public testing::TestWithParam<WireParam> {};

TEST_P(CrossNodeWire, SumsAreRoundedOncePerHopAtMost) {
  const auto [backend, ranks_per_node, wire] = GetParam();
  runtime::RankContext ctx(MPI_COMM_WORLD, runtime::NodeLayout{ranks_per_node, true});
  std::unique_ptr<Communicator> comm = make_communicator(parse_backend(backend, "test"), ctx, false, wire);
  const int nodes = ctx.topology().node_count;
  const bool crosses = nodes > 1;
  const int roundings = backend == "hierarchical" ? nodes : world_size();
  const uint64_t seed = test::shared_seed(MPI_COMM_WORLD);
  const int rank = world_rank();
  const int size = world_size();
  // 16-bit unit roundoff: 2^-8 (bf16), 2^-11 (fp16); fp16's subnormals (spacing 2^-24) add an
  // absolute half-spacing per rounding. The sums stay far below fp16's largest value.
  const double u = wire == DType::kBF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  const double subnormal = wire == DType::kF16 ? std::ldexp(1.0, -24) : 0.0;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    const double scale = op == ReduceOp::kAverage ? 1.0 / size : 1.0;
    for (size_t count : {size_t{0}, size_t{1}, static_cast<size_t>(size) + 1, size_t{7919}, (size_t{1} << 20) + 3}) {
      std::vector<double> exact(count, 0.0), magnitude(count, 0.0);
      std::vector<float> data;
      for (int r = 0; r < size; ++r) {
        const std::vector<double> v = test::random_values(seed, r, 11, count, DType::kF32);
        for (size_t i = 0; i < count; ++i) {
          exact[i] += v[i];
          magnitude[i] += std::fabs(v[i]);
        }
        if (r == rank) data.assign(v.begin(), v.end());
      }
      comm->all_reduce(data.data(), data.data(), count, DType::kF32, op).wait();
      size_t wrong = 0, not_narrowed = 0, first = 0;
      for (size_t i = 0; i < count; ++i) {
        const double bound =
            scale * ((crosses ? roundings * (u * magnitude[i] + subnormal) : 0.0) + 1e-6 * magnitude[i]) + 1e-30;
        if (!(std::fabs(data[i] - exact[i] * scale) <= bound) && wrong++ == 0) first = i;
        if (crosses && op == ReduceOp::kSum && !representable(data[i], wire)) ++not_narrowed;
      }
      const std::string what = backend + ", " + runtime::dtype_name(wire) + " wire, " + std::to_string(ranks_per_node) +
                               " rank(s) per node, " + std::to_string(nodes) + " node(s), " +
                               (op == ReduceOp::kSum ? "sum" : "average") + ", count " + std::to_string(count) +
                               ", seed " + std::to_string(seed);
      EXPECT_EQ(wrong, 0u) << what << ": first wrong element " << first << ": got " << (count ? data[first] : 0.0f)
                           << ", want " << (count ? exact[first] * scale : 0.0);
      EXPECT_EQ(not_narrowed, 0u) << what << ": sums that never crossed as 16 bits";
      EXPECT_TRUE(runtime::same_on_every_rank(MPI_COMM_WORLD, runtime::fingerprint(data.data(), count * sizeof(float))))
          << what << ": ranks hold different results";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, CrossNodeWire,
                         testing::Combine(testing::Values("hierarchical", "mpi-ring"), testing::Values(1, 2),
                                          testing::Values(DType::kBF16, DType::kF16)),
                         [](const testing::TestParamInfo<WireParam>& p) {
                           std::string name = std::get<0>(p.param) + "_rpn" + std::to_string(std::get<1>(p.param)) +
                                              "_" + runtime::dtype_name(std::get<2>(p.param));
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

// A UsageError from a collective check: the lowest rank holding it throws the text, the others
// UsageReportedElsewhere. Returns the text ("" on the silent ranks); fails when nothing is thrown.
template <typename F>
std::string usage_error_of(F&& f) {
  try {
    f();
  } catch (const runtime::UsageReportedElsewhere&) {
    return "";
  } catch (const runtime::UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no UsageError";
  return "";
}

TEST(Factory, NarrowWireNeedsHierarchicalOrMpiRing) {
  runtime::RankContext ctx(MPI_COMM_WORLD, runtime::NodeLayout{});
  EXPECT_NO_THROW(make_communicator(Backend::kMpiRing, ctx, false, DType::kBF16));
  EXPECT_NO_THROW(make_communicator(Backend::kHierarchical, ctx, false, DType::kF16));
  const std::string mpi = usage_error_of([&] { make_communicator(Backend::kMpi, ctx, false, DType::kBF16); });
  if (!mpi.empty()) {
    EXPECT_NE(mpi.find("--gradient-wire-dtype (gradient_wire_dtype) bf16 narrows"), std::string::npos) << mpi;
    EXPECT_NE(mpi.find("this job's backend is mpi (requested"), std::string::npos) << mpi;
  }
  const std::string int32 = usage_error_of([&] { make_communicator(Backend::kMpiRing, ctx, false, DType::kI32); });
  if (!int32.empty()) {
    EXPECT_NE(int32.find("(gradient_wire_dtype) int32: use auto"), std::string::npos) << int32;
  }
}

TEST(Factory, AutoPicksByNodesAndGpusAndSaysWhy) {
  runtime::Topology one_node;
  runtime::Topology two_nodes;
  two_nodes.world_size = 8;
  two_nodes.local_size = 4;
  two_nodes.node_count = 2;
  unsetenv("DTRAIN_NCCL_ACROSS_NODES");
  EXPECT_EQ(resolve_backend(Backend::kAuto, one_node, false), Backend::kMpiRing);
  EXPECT_EQ(resolve_backend(Backend::kAuto, two_nodes, false), Backend::kHierarchical);
  EXPECT_EQ(resolve_backend(Backend::kAuto, one_node, true), Backend::kNccl);
  EXPECT_EQ(resolve_backend(Backend::kMpi, two_nodes, true), Backend::kMpi);
  const BackendChoice gpus = choose_backend(Backend::kAuto, two_nodes, true);
  EXPECT_EQ(gpus.backend, Backend::kHierarchical);
  EXPECT_NE(gpus.why.find("auto: 8 ranks on 2 nodes of 4, GPUs: NCCL inside each node"), std::string::npos) << gpus.why;
  EXPECT_NE(gpus.why.find("DTRAIN_NCCL_ACROSS_NODES=1"), std::string::npos) << gpus.why;
  // One rank a node: the flat ring, GPUs or not (the same ring without the steps inside a node).
  runtime::Topology one_a_node;
  one_a_node.world_size = 4;
  one_a_node.node_count = 4;
  for (bool g : {false, true}) {
    const BackendChoice flat = choose_backend(Backend::kAuto, one_a_node, g);
    EXPECT_EQ(flat.backend, Backend::kMpiRing) << g;
    EXPECT_NE(flat.why.find("auto: 4 ranks on 4 nodes of 1"), std::string::npos) << flat.why;
    EXPECT_NE(flat.why.find("one rank a node"), std::string::npos) << flat.why;
  }
  // Uneven nodes, one of them with a single rank: still hierarchical.
  runtime::Topology uneven;
  uneven.world_size = 3;
  uneven.local_size = 1;
  uneven.node_count = 2;
  EXPECT_EQ(resolve_backend(Backend::kAuto, uneven, true), Backend::kHierarchical);
  // Nodes on a fabric NCCL can use: NCCL across them, for GPU jobs only.
  setenv("DTRAIN_NCCL_ACROSS_NODES", "1", 1);
  EXPECT_EQ(resolve_backend(Backend::kAuto, two_nodes, true), Backend::kNccl);
  EXPECT_EQ(resolve_backend(Backend::kAuto, two_nodes, false), Backend::kHierarchical);
  EXPECT_EQ(resolve_backend(Backend::kAuto, one_a_node, true), Backend::kNccl);
  setenv("DTRAIN_NCCL_ACROSS_NODES", "yes", 1);
  try {
    resolve_backend(Backend::kAuto, two_nodes, true);
    ADD_FAILURE() << "DTRAIN_NCCL_ACROSS_NODES=yes accepted";
  } catch (const runtime::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("DTRAIN_NCCL_ACROSS_NODES='yes'"), std::string::npos) << e.what();
  }
  unsetenv("DTRAIN_NCCL_ACROSS_NODES");
  EXPECT_EQ(parse_backend("mpi-ring", "--backend"), Backend::kMpiRing);
  EXPECT_THROW(parse_backend("gloo", "--backend"), runtime::UsageError);
  EXPECT_EQ(parse_sixteen_bit_sum("native", "--sixteen-bit-sum"), SixteenBitSum::kNative);
  EXPECT_THROW(parse_sixteen_bit_sum("bf16", "--sixteen-bit-sum"), runtime::UsageError);
}

TEST(Factory, AutoWireIsBf16ForGpuGradientsAcrossNodes) {
  runtime::Topology one_node;
  runtime::Topology two_nodes;
  two_nodes.node_count = 2;
  for (Backend b : {Backend::kHierarchical, Backend::kMpiRing}) {
    const WireChoice wire = choose_wire(std::nullopt, b, two_nodes, true);
    EXPECT_EQ(wire.dtype, DType::kBF16) << backend_name(b);
    EXPECT_EQ(wire.why, "auto: GPUs across 2 nodes; --gradient-wire-dtype fp32 to keep fp32");
    EXPECT_EQ(choose_wire(std::nullopt, b, one_node, true).dtype, DType::kF32) << backend_name(b);
    EXPECT_EQ(choose_wire(std::nullopt, b, two_nodes, false).dtype, DType::kF32) << backend_name(b);
  }
  EXPECT_EQ(choose_wire(std::nullopt, Backend::kHierarchical, two_nodes, false).why, "auto: a CPU job");
  EXPECT_EQ(choose_wire(std::nullopt, Backend::kHierarchical, one_node, true).why, "auto: one node");
  for (Backend b : {Backend::kMpi, Backend::kNccl}) {
    const WireChoice wire = choose_wire(std::nullopt, b, two_nodes, true);
    EXPECT_EQ(wire.dtype, DType::kF32) << backend_name(b);
    EXPECT_EQ(wire.why, "auto: the backend carries fp32 only");
  }
  EXPECT_EQ(choose_wire(DType::kF32, Backend::kMpiRing, two_nodes, true).dtype, DType::kF32);
  EXPECT_EQ(choose_wire(DType::kF16, Backend::kMpiRing, one_node, false).dtype, DType::kF16);
}

}  // namespace
}  // namespace dtrain::comm
