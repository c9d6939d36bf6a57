// The C ABI's collectives on device buffers (DTRAIN_CUDA) against exact references on 1-4 ranks
// (one GPU per rank): every dtype, counts 0, 1, 7919 and 2^20+3, in place and out of place; names
// submitted in different orders on different ranks; the stream rules: the library reads what the
// caller's stream wrote before the call (inputs are uploaded late, behind a sleeping host function
// on that stream, over stale bytes), and work queued on the caller's stream after
// dtrain_wait_stream sees the result. Half the operations complete through dtrain_wait_stream, half
// through dtrain_wait; a few on the legacy default stream (NULL). Inputs shift with a seed that
// rank 0 draws and prints (DTRAIN_TEST_SEED=n repeats a run).
//
// Like a user program it calls only <dtrain/dtrain.h> and the CUDA runtime (its own copy, as
// PyTorch's would be). Skips, saying why, without a CUDA build's GPU on every rank (scripts/
// gpu_checks.sh runs it on GPUs; CI only sees the skip).
#include <cuda_runtime_api.h>
#include <dtrain/dtrain.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tests/library/abi_values.h"

namespace dtrain::test {
namespace {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())

std::string g_skip;  // why this run skips; the same on every rank
int g_salt = 0;      // shifts every input: from the seed
cudaStream_t g_stream = nullptr;

// Collective: every rank reaches the same verdict.
std::string why_skip() {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
  int fewest = gpus;
  MPI_Allreduce(&gpus, &fewest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (fewest == 0) return "no GPU visible on some rank (device buffers need a GPU on every rank)";
  if (fewest < size)
    return std::to_string(size) + " ranks but " + std::to_string(fewest) + " GPUs; NCCL needs one GPU per rank";
  return "";
}

class DeviceEnvironment : public testing::Environment {
  void SetUp() override {
    g_skip = why_skip();
    if (!g_skip.empty()) return;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long seed = std::chrono::steady_clock::now().time_since_epoch().count() % 1000003;
    if (const char* given = std::getenv("DTRAIN_TEST_SEED")) seed = std::atol(given);
    MPI_Bcast(&seed, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    if (rank == 0) std::printf("seed %ld (DTRAIN_TEST_SEED=%ld repeats this run)\n", seed, seed);
    g_salt = static_cast<int>(seed % 9);
    ASSERT_EQ(dtrain_init(), DTRAIN_OK) << dtrain_last_error();
    ASSERT_GE(dtrain_gpu(), 0);
    CUDA_OK(cudaSetDevice(dtrain_gpu()));
    CUDA_OK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (!g_skip.empty()) return;
    cudaStreamDestroy(g_stream);
    ASSERT_EQ(dtrain_shutdown(), DTRAIN_OK) << dtrain_last_error();
  }
};
const auto* const kEnvironment = testing::AddGlobalTestEnvironment(new DeviceEnvironment);

#define SKIP_WITHOUT_GPUS() \
  if (!g_skip.empty()) GTEST_SKIP() << g_skip

int rank() {
  return dtrain_rank();
}
int size() {
  return dtrain_size();
}
double value(int r, int64_t i, int dtype) {
  return input(r, i, dtype, g_salt);
}
double reference(int64_t i, int dtype, int op) {
  return reduce_reference(i, dtype, op, size(), g_salt);
}

void sleep_20ms(void*) {
  usleep(20000);
}

// `count` elements of `dtype` in device memory, with a pinned host copy for the transfers.
class DeviceArray {
 public:
  DeviceArray(int dtype, int64_t count) : dtype_(dtype), count_(count), bytes_(count * dtype_bytes(dtype)) {
    EXPECT_EQ(cudaMalloc(&device_, bytes_ + 8), cudaSuccess);
    EXPECT_EQ(cudaMallocHost(&pinned_, bytes_ + 8), cudaSuccess);
  }
  ~DeviceArray() {
    cudaFree(device_);
    cudaFreeHost(pinned_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  void* data() const { return device_; }
  char* at(int64_t element) const { return static_cast<char*>(device_) + element * dtype_bytes(dtype_); }

  // Stale bytes first; then, on `stream`, `late` idles the stream for 20 ms before the values
  // arrive, so a library that did not order itself after the stream would read the stale ones.
  void upload(Buffer values, cudaStream_t stream, bool late) {
    std::memcpy(pinned_, values.bytes(), bytes_);
    ASSERT_EQ(cudaMemsetAsync(device_, 0x7b, bytes_ + 8, stream), cudaSuccess);
    if (late) {
      ASSERT_EQ(cudaLaunchHostFunc(stream, sleep_20ms, nullptr), cudaSuccess);
    }
    ASSERT_EQ(cudaMemcpyAsync(device_, pinned_, bytes_, cudaMemcpyHostToDevice, stream), cudaSuccess);
  }
  // Queues the copy down on `stream` and waits for it there (what a caller does after
  // dtrain_wait_stream).
  Buffer download(cudaStream_t stream) {
    Buffer out(dtype_, count_);
    EXPECT_EQ(cudaMemcpyAsync(pinned_, device_, bytes_, cudaMemcpyDeviceToHost, stream), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    std::memcpy(out.data(), pinned_, bytes_);
    return out;
  }

 private:
  int dtype_;
  int64_t count_;
  size_t bytes_;
  void* device_ = nullptr;
  void* pinned_ = nullptr;
};

Buffer inputs(int r, int dtype, int64_t count) {
  Buffer b(dtype, count);
  for (int64_t i = 0; i < count; ++i) b.set(i, value(r, i, dtype));
  return b;
}

// Alternating: the caller's stream waits (dtrain_wait_stream), or the host does (dtrain_wait).
void complete(dtrain_handle h, cudaStream_t stream, int k) {
  if (k % 2 == 0) {
    ASSERT_EQ(dtrain_wait_stream(h, stream), DTRAIN_OK) << dtrain_last_error();
  } else {
    ASSERT_EQ(dtrain_wait(h), DTRAIN_OK) << dtrain_last_error();
  }
}

// Every count in place and out of place, all in flight together (fused on the device where the
// device communicator reduces the dtype).
void check_allreduce(int dtype, int op, double prescale, double postscale) {
  struct Case {
    int64_t count;
    bool in_place;
    std::unique_ptr<DeviceArray> send, recv;
    dtrain_handle handle = 0;
  };
  std::vector<Case> cases;
  for (int64_t count : kCounts)
    for (bool in_place : {false, true})
      cases.push_back(
          {count, in_place, std::make_unique<DeviceArray>(dtype, count), std::make_unique<DeviceArray>(dtype, count)});
  for (Case& c : cases) {
    c.send->upload(inputs(rank(), dtype, c.count), g_stream, c.count == 7919);
    void* recv = c.in_place ? c.send->data() : c.recv->data();
    ASSERT_EQ(dtrain_allreduce(label("dar", dtype, c.count, op, c.in_place).c_str(), c.send->data(), recv, c.count,
                               dtype, op, prescale, postscale, DTRAIN_CUDA, g_stream, &c.handle),
              DTRAIN_OK)
        << dtrain_last_error();
  }
  int k = 0;
  for (Case& c : cases) {
    complete(c.handle, g_stream, k++);
    const Buffer out = (c.in_place ? c.send : c.recv)->download(g_stream);
    for (int64_t i = 0; i < c.count; ++i)
      ASSERT_EQ(out.get(i), reference(i, dtype, op) * prescale * postscale)
          << "dtype " << dtype << " op " << op << " count " << c.count << " in place " << c.in_place << " element "
          << i;
  }
}

TEST(DeviceAllReduce, EveryDtypeOpCountInAndOutOfPlace) {
  SKIP_WITHOUT_GPUS();
  for (int dtype : kDtypes)
    for (int op : {DTRAIN_SUM, DTRAIN_AVERAGE, DTRAIN_MIN, DTRAIN_MAX})
      if (op != DTRAIN_AVERAGE || floating(dtype)) check_allreduce(dtype, op, 1.0, 1.0);
}

// Powers of two keep the scaled sums exact in every floating format.
TEST(DeviceAllReduce, PreAndPostScale) {
  SKIP_WITHOUT_GPUS();
  for (int dtype : {DTRAIN_FLOAT16, DTRAIN_BFLOAT16, DTRAIN_FLOAT32, DTRAIN_FLOAT64})
    for (int op : {DTRAIN_SUM, DTRAIN_AVERAGE, DTRAIN_MAX}) check_allreduce(dtype, op, 0.5, 4.0);
}

TEST(DeviceBroadcast, EveryDtypeAndCountFromTheLastRank) {
  SKIP_WITHOUT_GPUS();
  const int root = size() - 1;
  int k = 0;
  for (int dtype : kDtypes) {
    for (int64_t count : kCounts) {
      DeviceArray buffer(dtype, count);
      buffer.upload(inputs(rank(), dtype, count), g_stream, count == 7919);
      dtrain_handle h = 0;
      ASSERT_EQ(dtrain_broadcast(label("dbc", dtype, count).c_str(), buffer.data(), count, dtype, root, DTRAIN_CUDA,
                                 g_stream, &h),
                DTRAIN_OK)
          << dtrain_last_error();
      complete(h, g_stream, k++);
      const Buffer out = buffer.download(g_stream);
      for (int64_t i = 0; i < count; ++i) ASSERT_EQ(out.get(i), value(root, i, dtype)) << dtype << " " << count;
    }
  }
}

// Rank r sends count + r x skew elements (skew 0: equal counts, the device communicator's path).
void check_allgather(int dtype, int64_t count, int skew, bool in_place, int k) {
  const auto [counts, offsets, total] = gather_layout(count, skew, size());
  const int64_t mine = counts[static_cast<size_t>(rank())];
  const int64_t offset = offsets[static_cast<size_t>(rank())];
  DeviceArray send(dtype, mine);
  DeviceArray recv(dtype, total);
  const void* source = send.data();
  if (in_place) {
    Buffer whole(dtype, total);
    for (int64_t i = 0; i < mine; ++i) whole.set(offset + i, value(rank(), i, dtype));
    recv.upload(whole, g_stream, count == 7919);
    source = recv.at(offset);
  } else {
    send.upload(inputs(rank(), dtype, mine), g_stream, count == 7919);
  }
  std::vector<int64_t> got_counts(counts.size(), -1);
  dtrain_handle h = 0;
  ASSERT_EQ(dtrain_allgather(label("dag", dtype, count, skew, in_place).c_str(), source, mine, recv.data(), total,
                             got_counts.data(), dtype, DTRAIN_CUDA, g_stream, &h),
            DTRAIN_OK)
      << dtrain_last_error();
  complete(h, g_stream, k);
  EXPECT_EQ(got_counts, counts);
  const Buffer out = recv.download(g_stream);
  for (int r = 0; r < size(); ++r)
    for (int64_t i = 0; i < counts[static_cast<size_t>(r)]; ++i)
      ASSERT_EQ(out.get(offsets[static_cast<size_t>(r)] + i), value(r, i, dtype))
          << "dtype " << dtype << " count " << count << " skew " << skew << " from rank " << r << " element " << i;
}

TEST(DeviceAllGather, EqualAndDifferingCountsInAndOutOfPlace) {
  SKIP_WITHOUT_GPUS();
  int k = 0;
  for (int dtype : kDtypes)
    for (int64_t count : kCounts)
      for (int skew : {0, 3})
        for (bool in_place : {false, true}) check_allgather(dtype, count, skew, in_place, k++);
}

void check_reducescatter(int dtype, int op, int64_t count, bool in_place, int k) {
  const int64_t total = count * size();
  DeviceArray send(dtype, total);
  DeviceArray recv(dtype, count);
  send.upload(inputs(rank(), dtype, total), g_stream, count == 7919);
  const int64_t mine = count * rank();
  void* out = in_place ? send.at(mine) : recv.data();
  dtrain_handle h = 0;
  ASSERT_EQ(dtrain_reducescatter(label("drs", dtype, count, op, in_place).c_str(), send.data(), out, count, dtype, op,
                                 DTRAIN_CUDA, g_stream, &h),
            DTRAIN_OK)
      << dtrain_last_error();
  complete(h, g_stream, k);
  const Buffer got = (in_place ? send : recv).download(g_stream);
  for (int64_t i = 0; i < count; ++i)
    ASSERT_EQ(got.get(in_place ? mine + i : i), reference(mine + i, dtype, op))
        << dtype << " " << op << " " << count << " " << i;
}

TEST(DeviceReduceScatter, EveryDtypeOpCountInAndOutOfPlace) {
  SKIP_WITHOUT_GPUS();
  int k = 0;
  for (int dtype : kDtypes)
    for (int op : {DTRAIN_SUM, DTRAIN_AVERAGE, DTRAIN_MIN, DTRAIN_MAX})
      for (int64_t count : kCounts)
        for (bool in_place : {false, true})
          if (op != DTRAIN_AVERAGE || floating(dtype)) check_reducescatter(dtype, op, count, in_place, k++);
}

TEST(DeviceAllToAll, EveryDtypeAndCount) {
  SKIP_WITHOUT_GPUS();
  int k = 0;
  for (int dtype : kDtypes) {
    for (int64_t count : kCounts) {
      const int64_t total = count * size();
      DeviceArray send(dtype, total);
      DeviceArray recv(dtype, total);
      send.upload(inputs(rank(), dtype, total), g_stream, count == 7919);
      dtrain_handle h = 0;
      ASSERT_EQ(dtrain_alltoall(label("da2a", dtype, count).c_str(), send.data(), recv.data(), count, dtype,
                                DTRAIN_CUDA, g_stream, &h),
                DTRAIN_OK)
          << dtrain_last_error();
      complete(h, g_stream, k++);
      const Buffer out = recv.download(g_stream);
      for (int r = 0; r < size(); ++r)
        for (int64_t i = 0; i < count; ++i)
          ASSERT_EQ(out.get(r * count + i), value(r, rank() * count + i, dtype)) << dtype << " " << count;
    }
  }
}

// Rank 0 submits A, B, C; rank 1 C, A, B; the others B, C, A; fp32 sums (fused on the device)
// and an int64 one (staged), on the legacy default stream.
TEST(DeviceNameMatching, AnySubmissionOrderOnTheDefaultStream) {
  SKIP_WITHOUT_GPUS();
  const char* names[] = {"dorder/A", "dorder/B", "dorder/C"};
  const int dtypes[] = {DTRAIN_FLOAT32, DTRAIN_FLOAT32, DTRAIN_INT64};
  const int64_t counts[] = {5, 7919, (int64_t{1} << 20) + 3};
  const std::vector<int> order = rank() == 0   ? std::vector<int>{0, 1, 2}
                                 : rank() == 1 ? std::vector<int>{2, 0, 1}
                                               : std::vector<int>{1, 2, 0};
  std::vector<std::unique_ptr<DeviceArray>> arrays;
  for (int k = 0; k < 3; ++k) arrays.push_back(std::make_unique<DeviceArray>(dtypes[k], counts[k]));
  dtrain_handle handles[3] = {0, 0, 0};
  for (int k : order) {
    DeviceArray& a = *arrays[static_cast<size_t>(k)];
    a.upload(inputs(rank(), dtypes[k], counts[k]), nullptr, true);
    ASSERT_EQ(dtrain_allreduce(names[k], a.data(), a.data(), counts[k], dtypes[k], DTRAIN_SUM, 1.0, 1.0, DTRAIN_CUDA,
                               nullptr, &handles[k]),
              DTRAIN_OK)
        << dtrain_last_error();
  }
  for (int k = 0; k < 3; ++k) {
    ASSERT_EQ(dtrain_wait_stream(handles[k], nullptr), DTRAIN_OK) << dtrain_last_error();
    const Buffer out = arrays[static_cast<size_t>(k)]->download(nullptr);
    for (int64_t i = 0; i < counts[k]; ++i)
      ASSERT_EQ(out.get(i), reference(i, dtypes[k], DTRAIN_SUM)) << names[k] << " element " << i;
  }
}

// dtrain_wait_stream releases the handle; dtrain_poll reports a device operation done only once
// the GPU has run it.
TEST(DeviceCompletion, PollWaitAndWaitStream) {
  SKIP_WITHOUT_GPUS();
  const int64_t count = int64_t{1} << 22;
  DeviceArray a(DTRAIN_FLOAT32, count);
  a.upload(inputs(rank(), DTRAIN_FLOAT32, count), g_stream, true);
  dtrain_handle h = 0;
  ASSERT_EQ(
      dtrain_allreduce("dpoll", a.data(), a.data(), count, DTRAIN_FLOAT32, DTRAIN_SUM, 1, 1, DTRAIN_CUDA, g_stream, &h),
      DTRAIN_OK);
  int done = 0;
  while (!done) ASSERT_EQ(dtrain_poll(h, &done), DTRAIN_OK) << dtrain_last_error();
  ASSERT_EQ(dtrain_wait_stream(h, g_stream), DTRAIN_OK);
  EXPECT_EQ(dtrain_wait_stream(h, g_stream), DTRAIN_ERR_UNKNOWN_HANDLE);
  EXPECT_EQ(dtrain_poll(h, &done), DTRAIN_ERR_UNKNOWN_HANDLE);
  const Buffer out = a.download(g_stream);
  for (int64_t i = 0; i < count; i += 4099) ASSERT_EQ(out.get(i), reference(i, DTRAIN_FLOAT32, DTRAIN_SUM)) << i;
}

// A failed cross-node step (DTRAIN_FAULT_INJECT=K: the K-th operation of the host-side
// communicators fails on their worker thread, as a broken link would) fails the wait of the
// collective it belongs to, on every rank, through dtrain_wait_stream as through dtrain_wait; the
// collectives after it complete exactly. Runs only under the variable (scripts/gpu_checks.sh: 2
// ranks as 2 simulated nodes); skips, saying so, without it.
TEST(DeviceFaults, AFailedCrossNodeStepFailsTheWaitOfItsOwnCollective) {
  SKIP_WITHOUT_GPUS();
  if (std::getenv("DTRAIN_FAULT_INJECT") == nullptr) {
    GTEST_SKIP() << "runs under DTRAIN_FAULT_INJECT across simulated nodes (scripts/gpu_checks.sh)";
  }
  constexpr int kCollectives = 8;
  constexpr int64_t kCount = 7919;
  int failed = -1, failures = 0;
  for (int k = 0; k < kCollectives; ++k) {
    DeviceArray a(DTRAIN_FLOAT32, kCount);
    a.upload(inputs(rank(), DTRAIN_FLOAT32, kCount), g_stream, false);
    dtrain_handle h = 0;
    ASSERT_EQ(dtrain_allreduce(("dfault" + std::to_string(k)).c_str(), a.data(), a.data(), kCount, DTRAIN_FLOAT32,
                               DTRAIN_SUM, 1, 1, DTRAIN_CUDA, g_stream, &h),
              DTRAIN_OK)
        << dtrain_last_error();
    const bool on_stream = k % 2 == 0;
    if ((on_stream ? dtrain_wait_stream(h, g_stream) : dtrain_wait(h)) != DTRAIN_OK) {
      const std::string error = dtrain_last_error();
      EXPECT_NE(error.find("injected fault"), std::string::npos) << "all-reduce " << k << ": " << error;
      failed = k;
      ++failures;
      continue;
    }
    const Buffer out = a.download(g_stream);
    int64_t wrong = 0;
    for (int64_t i = 0; i < kCount; ++i) wrong += out.get(i) != reference(i, DTRAIN_FLOAT32, DTRAIN_SUM);
    EXPECT_EQ(wrong, 0) << "all-reduce " << k << " (waited by " << (on_stream ? "dtrain_wait_stream" : "dtrain_wait")
                        << ") returned DTRAIN_OK with wrong elements";
  }
  EXPECT_EQ(failures, 1) << "collectives whose wait failed, of " << kCollectives;
  int lowest = failed, highest = failed;
  MPI_Allreduce(&failed, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&failed, &highest, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(lowest, highest) << "the ranks saw different collectives fail";
  if (rank() == 0) std::printf("injected fault: all-reduce %d failed on every rank, the others exact\n", failed);
}

// A host pointer as DTRAIN_CUDA and a device pointer as DTRAIN_HOST are errors naming the
// argument; ranks that disagree on the device of one name all get a mismatch naming it.
TEST(DeviceErrors, WrongMemoryAndDisagreeingDevices) {
  SKIP_WITHOUT_GPUS();
  DeviceArray device(DTRAIN_FLOAT32, 4);
  std::vector<float> host(4, 1.0f);
  dtrain_handle h = 0;
  // Host buffers are checked once this rank has used device buffers (also when this test runs alone).
  device.upload(inputs(rank(), DTRAIN_FLOAT32, 4), g_stream, false);
  ASSERT_EQ(dtrain_allreduce("dfirst", device.data(), device.data(), 4, DTRAIN_FLOAT32, DTRAIN_SUM, 1, 1, DTRAIN_CUDA,
                             g_stream, &h),
            DTRAIN_OK)
      << dtrain_last_error();
  ASSERT_EQ(dtrain_wait(h), DTRAIN_OK) << dtrain_last_error();
  EXPECT_EQ(dtrain_allreduce("dbad", host.data(), device.data(), 4, DTRAIN_FLOAT32, DTRAIN_SUM, 1, 1, DTRAIN_CUDA,
                             g_stream, &h),
            DTRAIN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dtrain_last_error()).find("send: "), std::string::npos) << dtrain_last_error();
  EXPECT_NE(std::string(dtrain_last_error()).find("is host memory"), std::string::npos) << dtrain_last_error();
  EXPECT_EQ(dtrain_allreduce("dbad", host.data(), device.data(), 4, DTRAIN_FLOAT32, DTRAIN_SUM, 1, 1, DTRAIN_HOST,
                             nullptr, &h),
            DTRAIN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dtrain_last_error()).find("recv: "), std::string::npos) << dtrain_last_error();
  EXPECT_NE(std::string(dtrain_last_error()).find("is device memory"), std::string::npos) << dtrain_last_error();
  if (size() == 1) return;
  device.upload(inputs(rank(), DTRAIN_FLOAT32, 4), g_stream, false);
  ASSERT_EQ(cudaStreamSynchronize(g_stream), cudaSuccess);
  const bool on_device = rank() == 0;
  ASSERT_EQ(dtrain_allreduce("dmixed", on_device ? device.data() : host.data(), on_device ? device.data() : host.data(),
                             4, DTRAIN_FLOAT32, DTRAIN_SUM, 1, 1, on_device ? DTRAIN_CUDA : DTRAIN_HOST, g_stream, &h),
            DTRAIN_OK)
      << dtrain_last_error();
  EXPECT_EQ(dtrain_wait(h), DTRAIN_ERR_MISMATCH);
  EXPECT_NE(std::string(dtrain_last_error()).find("'dmixed': device differs: rank 0 cuda"), std::string::npos)
      << dtrain_last_error();
}

}  // namespace
}  // namespace dtrain::test
