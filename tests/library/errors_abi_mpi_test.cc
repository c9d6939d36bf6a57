// The C ABI's bad input and disagreement between ranks: each is an error code and a text naming
// the argument or the operation and the ranks, never a crash or a hang. (Calls before dtrain_init
// and after dtrain_shutdown: abi_lifecycle_test.cc.)
#include <dtrain/dtrain.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

namespace {

// The status of `call`, with this thread's error text.
struct Outcome {
  int status;
  std::string text;
};
template <typename Call>
Outcome run(Call call) {
  const int status = call();
  return {status, status == DTRAIN_OK ? "" : dtrain_last_error()};
}

#define EXPECT_ERROR(outcome, code, fragment)                                                                 \
  do {                                                                                                        \
    const Outcome o_ = (outcome);                                                                             \
    EXPECT_EQ(o_.status, code) << o_.text;                                                                    \
    EXPECT_NE(o_.text.find(fragment), std::string::npos) << "'" << o_.text << "' lacks '" << fragment << "'"; \
  } while (0)

TEST(AbiBadInput, ArgumentsAreNamed) {
  alignas(8) float data[16] = {};
  dtrain_handle h = 0;
  auto allreduce = [&](const char* name, const void* send, void* recv, int64_t count, int dtype, int op) {
    return run(
        [&] { return dtrain_allreduce(name, send, recv, count, dtype, op, 1.0, 1.0, DTRAIN_HOST, nullptr, &h); });
  };
  EXPECT_ERROR(allreduce(nullptr, data, data, 4, DTRAIN_FLOAT32, DTRAIN_SUM), DTRAIN_ERR_INVALID_ARGUMENT,
               "name: NULL");
  EXPECT_ERROR(allreduce("", data, data, 4, DTRAIN_FLOAT32, DTRAIN_SUM), DTRAIN_ERR_INVALID_ARGUMENT, "name:");
  EXPECT_ERROR(allreduce("x", data, data, -1, DTRAIN_FLOAT32, DTRAIN_SUM), DTRAIN_ERR_INVALID_ARGUMENT,
               "count: -1 is negative");
  EXPECT_ERROR(allreduce("x", data, data, 4, 42, DTRAIN_SUM), DTRAIN_ERR_INVALID_ARGUMENT, "dtype: 42");
  EXPECT_ERROR(allreduce("x", data, data, 4, DTRAIN_FLOAT32, 9), DTRAIN_ERR_INVALID_ARGUMENT, "op: 9");
  EXPECT_ERROR(allreduce("x", nullptr, data, 4, DTRAIN_FLOAT32, DTRAIN_SUM), DTRAIN_ERR_INVALID_ARGUMENT, "send: NULL");
  EXPECT_ERROR(allreduce("x", data, nullptr, 4, DTRAIN_FLOAT32, DTRAIN_SUM), DTRAIN_ERR_INVALID_ARGUMENT, "recv: NULL");
  const char* misaligned = reinterpret_cast<const char*>(data) + 1;
  EXPECT_ERROR(allreduce("x", misaligned, data, 4, DTRAIN_FLOAT32, DTRAIN_SUM), DTRAIN_ERR_INVALID_ARGUMENT,
               "send: 0x");
  EXPECT_ERROR(allreduce("x", misaligned, data, 4, DTRAIN_FLOAT32, DTRAIN_SUM), DTRAIN_ERR_INVALID_ARGUMENT,
               "not aligned");
  EXPECT_ERROR(allreduce("x", data, data, 4, DTRAIN_INT32, DTRAIN_AVERAGE), DTRAIN_ERR_INVALID_ARGUMENT,
               "op: average needs a floating-point dtype");
  EXPECT_ERROR(run([&] {
                 return dtrain_allreduce("x", data, data, 4, DTRAIN_INT32, DTRAIN_SUM, 2.0, 1.0, DTRAIN_HOST, nullptr,
                                         &h);
               }),
               DTRAIN_ERR_INVALID_ARGUMENT, "prescale");
  EXPECT_ERROR(
      run([&] { return dtrain_allreduce("x", data, data, 4, DTRAIN_FLOAT32, DTRAIN_SUM, 1.0, 1.0, 7, nullptr, &h); }),
      DTRAIN_ERR_INVALID_ARGUMENT, "device: 7");
  {
    // Without a GPU on every rank (or without CUDA) device buffers are unsupported, naming the
    // argument; where they are supported, a host buffer passed as one is named instead.
    const Outcome o = run([&] {
      return dtrain_allreduce("x", data, data, 4, DTRAIN_FLOAT32, DTRAIN_SUM, 1.0, 1.0, DTRAIN_CUDA, nullptr, &h);
    });
    const bool unsupported =
        o.status == DTRAIN_ERR_UNSUPPORTED && o.text.find("device: DTRAIN_CUDA") != std::string::npos;
    const bool host_memory = o.status == DTRAIN_ERR_INVALID_ARGUMENT && o.text.find("send: ") != std::string::npos &&
                             o.text.find("is host memory") != std::string::npos;
    EXPECT_TRUE(unsupported || host_memory) << o.status << ": " << o.text;
  }
  EXPECT_ERROR(run([&] {
                 return dtrain_allreduce("x", data, data, 4, DTRAIN_FLOAT32, DTRAIN_SUM, 1.0, 1.0, DTRAIN_HOST, nullptr,
                                         nullptr);
               }),
               DTRAIN_ERR_INVALID_ARGUMENT, "handle: NULL");
  EXPECT_ERROR(
      run([&] { return dtrain_broadcast("x", data, 4, DTRAIN_FLOAT32, dtrain_size(), DTRAIN_HOST, nullptr, &h); }),
      DTRAIN_ERR_INVALID_ARGUMENT, "root: " + std::to_string(dtrain_size()));
  EXPECT_ERROR(
      run([&] { return dtrain_allgather("x", data, 4, data, 3, nullptr, DTRAIN_FLOAT32, DTRAIN_HOST, nullptr, &h); }),
      DTRAIN_ERR_INVALID_ARGUMENT, "recv_capacity: 3");
  EXPECT_ERROR(run([&] { return dtrain_alltoall("x", data, data, 1, DTRAIN_FLOAT32, DTRAIN_HOST, nullptr, &h); }),
               DTRAIN_ERR_INVALID_ARGUMENT, "out of place only");
  EXPECT_ERROR(run([&] { return dtrain_barrier(nullptr, &h); }), DTRAIN_ERR_INVALID_ARGUMENT, "name: NULL");
}

TEST(AbiBadInput, UnknownAndTwiceWaitedHandles) {
  EXPECT_ERROR(run([] { return dtrain_wait(123456789); }), DTRAIN_ERR_UNKNOWN_HANDLE, "handle: 123456789");
  int done = 0;
  EXPECT_ERROR(run([&] { return dtrain_poll(-5, &done); }), DTRAIN_ERR_UNKNOWN_HANDLE, "handle: -5");
  dtrain_handle h = 0;
  ASSERT_EQ(dtrain_barrier("twice", &h), DTRAIN_OK) << dtrain_last_error();
  EXPECT_ERROR(run([&] { return dtrain_poll(h, nullptr); }), DTRAIN_ERR_INVALID_ARGUMENT, "done: NULL");
  ASSERT_EQ(dtrain_wait(h), DTRAIN_OK) << dtrain_last_error();
  EXPECT_ERROR(run([&] { return dtrain_wait(h); }), DTRAIN_ERR_UNKNOWN_HANDLE, "already waited");
}

// A name still in flight on this rank cannot be submitted again. The other ranks submit it only
// after rank 0 has tried twice, so it cannot have finished in between.
TEST(AbiBadInput, NameInFlightTwice) {
  if (dtrain_size() < 2) GTEST_SKIP() << "needs 2 ranks to hold the first submission in flight";
  int one = 1;
  dtrain_handle first = 0;
  dtrain_handle second = 0;
  if (dtrain_rank() == 0) {
    ASSERT_EQ(dtrain_allreduce("dup", &one, &one, 1, DTRAIN_INT32, DTRAIN_SUM, 1, 1, DTRAIN_HOST, nullptr, &first),
              DTRAIN_OK);
    EXPECT_ERROR(run([&] {
                   return dtrain_allreduce("dup", &one, &one, 1, DTRAIN_INT32, DTRAIN_SUM, 1, 1, DTRAIN_HOST, nullptr,
                                           &second);
                 }),
                 DTRAIN_ERR_INVALID_ARGUMENT, "'dup' is already in flight");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (dtrain_rank() != 0) {
    ASSERT_EQ(dtrain_allreduce("dup", &one, &one, 1, DTRAIN_INT32, DTRAIN_SUM, 1, 1, DTRAIN_HOST, nullptr, &first),
              DTRAIN_OK);
  }
  ASSERT_EQ(dtrain_wait(first), DTRAIN_OK) << dtrain_last_error();
  EXPECT_EQ(one, dtrain_size());
}

// Ranks that disagree on one name all get DTRAIN_ERR_MISMATCH naming it, the field and rank 1.
TEST(AbiMismatch, EveryRankIsToldWhatDiffers) {
  if (dtrain_size() < 2) GTEST_SKIP() << "needs 2 ranks to disagree";
  const bool odd = dtrain_rank() == 1;
  alignas(8) double data[16] = {};
  dtrain_handle count_h = 0;
  dtrain_handle dtype_h = 0;
  dtrain_handle root_h = 0;
  dtrain_handle op_h = 0;
  ASSERT_EQ(dtrain_allreduce("mm/count", data, data, odd ? 5 : 4, DTRAIN_FLOAT32, DTRAIN_SUM, 1, 1, DTRAIN_HOST,
                             nullptr, &count_h),
            DTRAIN_OK);
  ASSERT_EQ(dtrain_allreduce("mm/dtype", data, data, 4, odd ? DTRAIN_FLOAT64 : DTRAIN_FLOAT32, DTRAIN_SUM, 1, 1,
                             DTRAIN_HOST, nullptr, &dtype_h),
            DTRAIN_OK);
  ASSERT_EQ(dtrain_broadcast("mm/root", data, 4, DTRAIN_FLOAT32, odd ? 1 : 0, DTRAIN_HOST, nullptr, &root_h),
            DTRAIN_OK);
  ASSERT_EQ(dtrain_allreduce("mm/op", data, data, 4, DTRAIN_FLOAT32, odd ? DTRAIN_MAX : DTRAIN_SUM, 1, 1, DTRAIN_HOST,
                             nullptr, &op_h),
            DTRAIN_OK);
  EXPECT_ERROR(run([&] { return dtrain_wait(count_h); }), DTRAIN_ERR_MISMATCH, "'mm/count': count differs");
  EXPECT_ERROR(run([&] { return dtrain_wait(dtype_h); }), DTRAIN_ERR_MISMATCH, "dtype differs");
  EXPECT_ERROR(run([&] { return dtrain_wait(root_h); }), DTRAIN_ERR_MISMATCH, "root differs");
  EXPECT_ERROR(run([&] { return dtrain_wait(op_h); }), DTRAIN_ERR_MISMATCH, "rank 1 max");
  // The names are free again, and a matching call under one of them works.
  dtrain_handle again = 0;
  ASSERT_EQ(dtrain_allreduce("mm/count", data, data, 4, DTRAIN_FLOAT32, DTRAIN_SUM, 1, 1, DTRAIN_HOST, nullptr, &again),
            DTRAIN_OK);
  EXPECT_EQ(dtrain_wait(again), DTRAIN_OK) << dtrain_last_error();
}

// Capacities too short for the gathered total are named on every rank.
TEST(AbiMismatch, AllGatherCapacityTooShort) {
  if (dtrain_size() < 2) GTEST_SKIP() << "one rank's own count already covers its capacity check";
  alignas(8) float data[64] = {};
  const int64_t capacity = dtrain_rank() == 0 ? dtrain_size() * 2 - 1 : dtrain_size() * 2;
  dtrain_handle h = 0;
  ASSERT_EQ(dtrain_allgather("short", data, 2, data + 32, capacity, nullptr, DTRAIN_FLOAT32, DTRAIN_HOST, nullptr, &h),
            DTRAIN_OK)
      << dtrain_last_error();
  EXPECT_ERROR(run([&] { return dtrain_wait(h); }), DTRAIN_ERR_MISMATCH,
               "rank 0 has " + std::to_string(dtrain_size() * 2 - 1));
}

}  // namespace
