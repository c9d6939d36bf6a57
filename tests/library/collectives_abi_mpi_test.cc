// The C ABI's collectives against exact references on 1-4 ranks: every dtype, counts 0, 1, 7919
// and 2^20+3, in place and out of place; names submitted in different orders on different ranks;
// many small all-reduces in flight at once (fused). Only <dtrain/dtrain.h> is called: the test
// links libdtrain.so as a user program does (MPI is initialized first by the test's main, so this
// is also the "caller already initialized MPI" path).
#include <dtrain/dtrain.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <vector>

#include "tests/library/abi_values.h"

namespace dtrain::test {
namespace {

class LibraryEnvironment : public testing::Environment {
  void SetUp() override { ASSERT_EQ(dtrain_init(), DTRAIN_OK) << dtrain_last_error(); }
  void TearDown() override { ASSERT_EQ(dtrain_shutdown(), DTRAIN_OK) << dtrain_last_error(); }
};
const auto* const kEnvironment = testing::AddGlobalTestEnvironment(new LibraryEnvironment);

void wait_ok(dtrain_handle h) {
  ASSERT_EQ(dtrain_wait(h), DTRAIN_OK) << dtrain_last_error();
}

int rank() {
  return dtrain_rank();
}
int size() {
  return dtrain_size();
}

TEST(AbiTopology, AgreesWithMpi) {
  int mpi_rank = -1;
  int mpi_size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  EXPECT_EQ(dtrain_is_initialized(), 1);
  EXPECT_EQ(dtrain_rank(), mpi_rank);
  EXPECT_EQ(dtrain_size(), mpi_size);
  EXPECT_GE(dtrain_local_rank(), 0);
  EXPECT_LT(dtrain_local_rank(), dtrain_local_size());
  EXPECT_GE(dtrain_cross_rank(), 0);
  EXPECT_LT(dtrain_cross_rank(), dtrain_cross_size());
  EXPECT_EQ(dtrain_local_size() * dtrain_cross_size(), dtrain_size());
  EXPECT_EQ(dtrain_abi_version(), DTRAIN_ABI_VERSION);
  EXPECT_EQ(dtrain_check_abi(DTRAIN_ABI_VERSION), DTRAIN_OK);
  EXPECT_EQ(dtrain_check_abi(DTRAIN_ABI_VERSION + 1), DTRAIN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dtrain_last_error()).find("ABI"), std::string::npos);
  EXPECT_STRNE(dtrain_version(), "");
}

// For one dtype and op, every count in place and out of place, all in flight together.
void check_allreduce(int dtype, int op, double prescale, double postscale) {
  struct Case {
    int64_t count;
    bool in_place;
    Buffer send, recv;
    dtrain_handle handle = 0;
  };
  std::vector<Case> cases;
  for (int64_t count : kCounts)
    for (bool in_place : {false, true}) cases.push_back({count, in_place, Buffer(dtype, count), Buffer(dtype, count)});
  for (Case& c : cases) {
    for (int64_t i = 0; i < c.count; ++i) c.send.set(i, input(rank(), i, dtype));
    void* recv = c.in_place ? c.send.data() : c.recv.data();
    ASSERT_EQ(dtrain_allreduce(label("ar", dtype, c.count, op, c.in_place).c_str(), c.send.data(), recv, c.count, dtype,
                               op, prescale, postscale, DTRAIN_HOST, nullptr, &c.handle),
              DTRAIN_OK)
        << dtrain_last_error();
  }
  for (Case& c : cases) {
    wait_ok(c.handle);
    const Buffer& out = c.in_place ? c.send : c.recv;
    for (int64_t i = 0; i < c.count; ++i) {
      const double expected = reduce_reference(i, dtype, op, size()) * prescale * postscale;
      ASSERT_EQ(out.get(i), expected) << "dtype " << dtype << " op " << op << " count " << c.count << " in place "
                                      << c.in_place << " element " << i;
    }
  }
}

TEST(AbiAllReduce, EveryDtypeOpCountInAndOutOfPlace) {
  for (int dtype : kDtypes)
    for (int op : {DTRAIN_SUM, DTRAIN_AVERAGE, DTRAIN_MIN, DTRAIN_MAX})
      if (op != DTRAIN_AVERAGE || floating(dtype)) check_allreduce(dtype, op, 1.0, 1.0);
}

// Powers of two keep the scaled sums exact in every floating format.
TEST(AbiAllReduce, PreAndPostScale) {
  for (int dtype : {DTRAIN_FLOAT16, DTRAIN_BFLOAT16, DTRAIN_FLOAT32, DTRAIN_FLOAT64})
    for (int op : {DTRAIN_SUM, DTRAIN_MAX}) check_allreduce(dtype, op, 0.5, 4.0);
}

TEST(AbiBroadcast, EveryDtypeAndCountFromTheLastRank) {
  const int root = size() - 1;
  for (int dtype : kDtypes) {
    for (int64_t count : kCounts) {
      Buffer buffer(dtype, count);
      for (int64_t i = 0; i < count; ++i) buffer.set(i, input(rank(), i, dtype));
      dtrain_handle h = 0;
      ASSERT_EQ(dtrain_broadcast(label("bc", dtype, count).c_str(), buffer.data(), count, dtype, root, DTRAIN_HOST,
                                 nullptr, &h),
                DTRAIN_OK)
          << dtrain_last_error();
      wait_ok(h);
      for (int64_t i = 0; i < count; ++i) ASSERT_EQ(buffer.get(i), input(root, i, dtype)) << dtype << " " << count;
    }
  }
}

// Rank r sends count + r x skew elements (skew 0: equal counts, the Communicator's path).
void check_allgather(int dtype, int64_t count, int skew, bool in_place) {
  const auto [counts, offsets, total] = gather_layout(count, skew, size());
  const int64_t mine = counts[static_cast<size_t>(rank())];
  Buffer send(dtype, mine);
  Buffer recv(dtype, total);
  for (int64_t i = 0; i < mine; ++i) send.set(i, input(rank(), i, dtype));
  const void* source = send.data();
  if (in_place) {
    for (int64_t i = 0; i < mine; ++i) recv.set(offsets[static_cast<size_t>(rank())] + i, input(rank(), i, dtype));
    source = recv.bytes() + offsets[static_cast<size_t>(rank())] * static_cast<int64_t>(dtype_bytes(dtype));
  }
  std::vector<int64_t> got_counts(counts.size(), -1);
  dtrain_handle h = 0;
  ASSERT_EQ(dtrain_allgather(label("ag", dtype, count, skew, in_place).c_str(), source, mine, recv.data(), total,
                             got_counts.data(), dtype, DTRAIN_HOST, nullptr, &h),
            DTRAIN_OK)
      << dtrain_last_error();
  wait_ok(h);
  EXPECT_EQ(got_counts, counts);
  for (int r = 0; r < size(); ++r)
    for (int64_t i = 0; i < counts[static_cast<size_t>(r)]; ++i)
      ASSERT_EQ(recv.get(offsets[static_cast<size_t>(r)] + i), input(r, i, dtype))
          << "dtype " << dtype << " count " << count << " skew " << skew << " from rank " << r << " element " << i;
}

TEST(AbiAllGather, EqualAndDifferingCountsInAndOutOfPlace) {
  for (int dtype : kDtypes)
    for (int64_t count : kCounts)
      for (int skew : {0, 3})
        for (bool in_place : {false, true}) check_allgather(dtype, count, skew, in_place);
}

void check_reducescatter(int dtype, int op, int64_t count, bool in_place) {
  const int64_t total = count * size();
  Buffer send(dtype, total);
  Buffer recv(dtype, count);
  // Block j of rank r's input holds the values rank r gives rank j: element (j x count + i).
  for (int64_t k = 0; k < total; ++k) send.set(k, input(rank(), k, dtype));
  const int64_t mine = count * rank();
  void* out = in_place ? send.bytes() + mine * static_cast<int64_t>(dtype_bytes(dtype)) : recv.data();
  dtrain_handle h = 0;
  ASSERT_EQ(dtrain_reducescatter(label("rs", dtype, count, op, in_place).c_str(), send.data(), out, count, dtype, op,
                                 DTRAIN_HOST, nullptr, &h),
            DTRAIN_OK)
      << dtrain_last_error();
  wait_ok(h);
  for (int64_t i = 0; i < count; ++i) {
    const double got = in_place ? send.get(mine + i) : recv.get(i);
    ASSERT_EQ(got, reduce_reference(mine + i, dtype, op, size())) << dtype << " " << op << " " << count << " " << i;
  }
}

TEST(AbiReduceScatter, EveryDtypeOpCountInAndOutOfPlace) {
  for (int dtype : kDtypes)
    for (int op : {DTRAIN_SUM, DTRAIN_AVERAGE, DTRAIN_MIN, DTRAIN_MAX})
      for (int64_t count : kCounts)
        for (bool in_place : {false, true})
          if (op != DTRAIN_AVERAGE || floating(dtype)) check_reducescatter(dtype, op, count, in_place);
}

TEST(AbiAllToAll, EveryDtypeAndCount) {
  for (int dtype : kDtypes) {
    for (int64_t count : kCounts) {
      const int64_t total = count * size();
      Buffer send(dtype, total);
      Buffer recv(dtype, total);
      // Rank r's block for rank j holds input(r, j x count + i).
      for (int64_t k = 0; k < total; ++k) send.set(k, input(rank(), k, dtype));
      dtrain_handle h = 0;
      ASSERT_EQ(dtrain_alltoall(label("a2a", dtype, count).c_str(), send.data(), recv.data(), count, dtype, DTRAIN_HOST,
                                nullptr, &h),
                DTRAIN_OK)
          << dtrain_last_error();
      wait_ok(h);
      for (int r = 0; r < size(); ++r)
        for (int64_t i = 0; i < count; ++i)
          ASSERT_EQ(recv.get(r * count + i), input(r, rank() * count + i, dtype)) << dtype << " " << count;
    }
  }
}

TEST(AbiBarrier, Completes) {
  dtrain_handle h = 0;
  ASSERT_EQ(dtrain_barrier("barrier", &h), DTRAIN_OK) << dtrain_last_error();
  int done = 0;
  ASSERT_EQ(dtrain_poll(h, &done), DTRAIN_OK);
  wait_ok(h);
}

// On a host operation dtrain_wait_stream is dtrain_wait: the result is there, the handle released.
TEST(AbiCompletion, WaitStreamOnAHostOperationIsWait) {
  int64_t value = rank() + 1;
  dtrain_handle h = 0;
  ASSERT_EQ(
      dtrain_allreduce("wait-stream", &value, &value, 1, DTRAIN_INT64, DTRAIN_SUM, 1, 1, DTRAIN_HOST, nullptr, &h),
      DTRAIN_OK)
      << dtrain_last_error();
  ASSERT_EQ(dtrain_wait_stream(h, nullptr), DTRAIN_OK) << dtrain_last_error();
  EXPECT_EQ(value, int64_t{size()} * (size() + 1) / 2);
  EXPECT_EQ(dtrain_wait_stream(h, nullptr), DTRAIN_ERR_UNKNOWN_HANDLE);
  EXPECT_NE(std::string(dtrain_last_error()).find("dtrain_wait_stream: handle: "), std::string::npos)
      << dtrain_last_error();
}

// Rank 0 submits A, B, C; rank 1 C, A, B; the others B, C, A. Each gets the right sums.
TEST(AbiNameMatching, AnySubmissionOrder) {
  const char* names[] = {"order/A", "order/B", "order/C"};
  const int64_t counts[] = {5, 7919, 3};
  std::vector<int> order = rank() == 0   ? std::vector<int>{0, 1, 2}
                           : rank() == 1 ? std::vector<int>{2, 0, 1}
                                         : std::vector<int>{1, 2, 0};
  std::vector<Buffer> buffers;
  for (int k = 0; k < 3; ++k) buffers.emplace_back(DTRAIN_INT64, counts[k]);
  dtrain_handle handles[3] = {0, 0, 0};
  for (int k : order) {
    for (int64_t i = 0; i < counts[k]; ++i) buffers[static_cast<size_t>(k)].set(i, input(rank(), i, DTRAIN_INT64, k));
    ASSERT_EQ(dtrain_allreduce(names[k], buffers[static_cast<size_t>(k)].data(), buffers[static_cast<size_t>(k)].data(),
                               counts[k], DTRAIN_INT64, DTRAIN_SUM, 1.0, 1.0, DTRAIN_HOST, nullptr, &handles[k]),
              DTRAIN_OK)
        << dtrain_last_error();
  }
  for (int k = 0; k < 3; ++k) {
    wait_ok(handles[k]);
    for (int64_t i = 0; i < counts[k]; ++i)
      ASSERT_EQ(buffers[static_cast<size_t>(k)].get(i), reduce_reference(i, DTRAIN_INT64, DTRAIN_SUM, size(), k))
          << names[k] << " element " << i;
  }
}

// Empty operations may pass NULL buffers, also inside a fused group of all-reduces.
TEST(AbiCollectives, EmptyOperationsTakeNullBuffers) {
  float value = 1;
  std::vector<dtrain_handle> handles(7);
  ASSERT_EQ(dtrain_allreduce("empty/one", &value, &value, 1, DTRAIN_FLOAT32, DTRAIN_SUM, 1, 1, DTRAIN_HOST, nullptr,
                             &handles[0]),
            DTRAIN_OK);
  ASSERT_EQ(dtrain_allreduce("empty/ar", nullptr, nullptr, 0, DTRAIN_FLOAT32, DTRAIN_SUM, 1, 1, DTRAIN_HOST, nullptr,
                             &handles[1]),
            DTRAIN_OK);
  ASSERT_EQ(dtrain_allreduce("empty/ar64", nullptr, nullptr, 0, DTRAIN_INT64, DTRAIN_MAX, 1, 1, DTRAIN_HOST, nullptr,
                             &handles[2]),
            DTRAIN_OK);
  ASSERT_EQ(dtrain_broadcast("empty/bc", nullptr, 0, DTRAIN_INT8, 0, DTRAIN_HOST, nullptr, &handles[3]), DTRAIN_OK);
  ASSERT_EQ(
      dtrain_allgather("empty/ag", nullptr, 0, nullptr, 0, nullptr, DTRAIN_UINT8, DTRAIN_HOST, nullptr, &handles[4]),
      DTRAIN_OK);
  ASSERT_EQ(dtrain_reducescatter("empty/rs", nullptr, nullptr, 0, DTRAIN_BFLOAT16, DTRAIN_MIN, DTRAIN_HOST, nullptr,
                                 &handles[5]),
            DTRAIN_OK);
  ASSERT_EQ(dtrain_alltoall("empty/a2a", nullptr, nullptr, 0, DTRAIN_FLOAT64, DTRAIN_HOST, nullptr, &handles[6]),
            DTRAIN_OK);
  for (dtrain_handle h : handles) wait_ok(h);
  EXPECT_EQ(value, static_cast<float>(size()));
}

// A thousand 4-byte all-reduces in flight at once (fused by the coordinator), each right.
TEST(AbiNameMatching, ManySmallAllReducesInFlight) {
  constexpr int kOps = 1000;
  int64_t operations0 = 0;
  int64_t collectives0 = 0;
  ASSERT_EQ(dtrain_fusion_stats(&operations0, &collectives0), DTRAIN_OK) << dtrain_last_error();
  std::vector<float> values(kOps);
  std::vector<dtrain_handle> handles(kOps);
  for (int k = 0; k < kOps; ++k) {
    // Submitted in a rank-dependent order, so fusion groups must not depend on it.
    const int j = rank() % 2 ? kOps - 1 - k : k;
    values[static_cast<size_t>(j)] = static_cast<float>(rank() + j % 5);
    ASSERT_EQ(dtrain_allreduce(("many/" + std::to_string(j)).c_str(), &values[static_cast<size_t>(j)],
                               &values[static_cast<size_t>(j)], 1, DTRAIN_FLOAT32, DTRAIN_SUM, 1.0, 1.0, DTRAIN_HOST,
                               nullptr, &handles[static_cast<size_t>(j)]),
              DTRAIN_OK)
        << dtrain_last_error();
  }
  const float rank_sum = static_cast<float>(size() * (size() - 1) / 2);
  for (int j = 0; j < kOps; ++j) {
    wait_ok(handles[static_cast<size_t>(j)]);
    ASSERT_EQ(values[static_cast<size_t>(j)], rank_sum + static_cast<float>(size() * (j % 5))) << j;
  }
  // Every operation counted once; how many collectives depends on how the cycles cut the stream.
  int64_t operations = 0;
  int64_t collectives = 0;
  ASSERT_EQ(dtrain_fusion_stats(&operations, &collectives), DTRAIN_OK) << dtrain_last_error();
  EXPECT_EQ(operations - operations0, kOps);
  EXPECT_GE(collectives - collectives0, 1);
  EXPECT_LE(collectives - collectives0, kOps);
}

// Names long enough that a cycle's requests and rank 0's answer exceed the control plane's
// fixed-size slots (library/control_exchange.h), so the second round runs both ways; on odd ranks
// a short name is in the same cycle, whose requests still fit.
TEST(AbiNameMatching, LongNamesOverflowTheControlSlots) {
  for (size_t length : {200, 300, 4096}) {
    const std::string long_name = "long/" + std::string(length - 5, 'x');
    float a = static_cast<float>(rank() + 1);
    float b = 2;
    dtrain_handle ha = 0;
    dtrain_handle hb = 0;
    ASSERT_EQ(
        dtrain_allreduce(long_name.c_str(), &a, &a, 1, DTRAIN_FLOAT32, DTRAIN_SUM, 1.0, 1.0, DTRAIN_HOST, nullptr, &ha),
        DTRAIN_OK)
        << dtrain_last_error();
    ASSERT_EQ(
        dtrain_allreduce("long/short", &b, &b, 1, DTRAIN_FLOAT32, DTRAIN_MAX, 1.0, 1.0, DTRAIN_HOST, nullptr, &hb),
        DTRAIN_OK);
    wait_ok(ha);
    wait_ok(hb);
    EXPECT_EQ(a, static_cast<float>(size() * (size() + 1) / 2)) << "name of " << length << " bytes";
    EXPECT_EQ(b, 2.0f);
  }
}

// dtrain_fusion_stats counts an operation and its collective before the handle completes, so a
// lone all-reduce or barrier is exactly one of each once waited; NULL arguments are named.
TEST(AbiFusionStats, CountsEachOperationOnceWaited) {
  int64_t operations0 = 0;
  int64_t collectives0 = 0;
  ASSERT_EQ(dtrain_fusion_stats(&operations0, &collectives0), DTRAIN_OK) << dtrain_last_error();
  float value = 1;
  dtrain_handle h = 0;
  ASSERT_EQ(
      dtrain_allreduce("stats/one", &value, &value, 1, DTRAIN_FLOAT32, DTRAIN_SUM, 1.0, 1.0, DTRAIN_HOST, nullptr, &h),
      DTRAIN_OK);
  wait_ok(h);
  int64_t operations = 0;
  int64_t collectives = 0;
  ASSERT_EQ(dtrain_fusion_stats(&operations, &collectives), DTRAIN_OK);
  EXPECT_EQ(operations - operations0, 1);
  EXPECT_EQ(collectives - collectives0, 1);
  ASSERT_EQ(dtrain_barrier("stats/barrier", &h), DTRAIN_OK);
  wait_ok(h);
  ASSERT_EQ(dtrain_fusion_stats(&operations, &collectives), DTRAIN_OK);
  EXPECT_EQ(operations - operations0, 2);
  EXPECT_EQ(collectives - collectives0, 2);
  EXPECT_EQ(value, static_cast<float>(size()));

  EXPECT_EQ(dtrain_fusion_stats(nullptr, &collectives), DTRAIN_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(dtrain_last_error(), "dtrain_fusion_stats: operations: NULL");
  EXPECT_EQ(dtrain_fusion_stats(&operations, nullptr), DTRAIN_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(dtrain_last_error(), "dtrain_fusion_stats: collectives: NULL");
}

}  // namespace
}  // namespace dtrain::test
