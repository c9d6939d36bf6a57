#include "comm/host/ring.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>

#include "comm/diagnostics/consistency_check.h"
#include "comm/host/host_reduce.h"
#include "comm/host/yielding_wait.h"
#include "runtime/base/env.h"
#include "runtime/base/error.h"
#include "runtime/mpi/mpi_check.h"

namespace dtrain::comm {
namespace {

constexpr int kRingTag = 0x7269;  // messages of one communicator arrive in order; one tag suffices

int mod(int a, int n) {
  return ((a % n) + n) % n;
}

// MPI counts are int: split byte ranges into messages of at most this many bytes.
constexpr size_t kMaxMessageBytes = size_t{1} << 30;

}  // namespace

RingTuning ring_tuning_from_env() {
  RingTuning tuning;
  if (auto v = runtime::env_int("DTRAIN_RING_SEGMENT_BYTES", 1024, int64_t{1} << 30)) {
    tuning.segment_bytes = static_cast<size_t>(*v);
  }
  if (auto v = runtime::env_int("DTRAIN_RING_SMALL_BYTES", 0, int64_t{1} << 30))
    tuning.small_bytes = static_cast<size_t>(*v);
  if (auto v = runtime::env_int("DTRAIN_RING_LANES", 1, 16)) tuning.lanes = static_cast<int>(*v);
  if (auto v = runtime::env_int("DTRAIN_SHM_ALLREDUCE", 0, 1)) tuning.shm = *v == 1;
  if (auto v = runtime::env_int("DTRAIN_SHM_MIN_BYTES", 0, int64_t{1} << 40))
    tuning.shm_min_bytes = static_cast<size_t>(*v);
  if (auto v = runtime::env_int("DTRAIN_SHM_CHUNK_BYTES", 4096, int64_t{1} << 30))
    tuning.shm_chunk_bytes = static_cast<size_t>(*v);
  return tuning;
}

void check_same_tuning(MPI_Comm comm, const RingTuning& tuning) {
  check_same_setting(comm, "DTRAIN_RING_SEGMENT_BYTES", tuning.segment_bytes);
  check_same_setting(comm, "DTRAIN_RING_SMALL_BYTES", tuning.small_bytes);
  check_same_setting(comm, "DTRAIN_RING_LANES", static_cast<uint64_t>(tuning.lanes));
  // Ranks on different paths would wait for messages or counters that never come.
  check_same_setting(comm, "DTRAIN_SHM_ALLREDUCE", tuning.shm ? 1 : 0);
  check_same_setting(comm, "DTRAIN_SHM_MIN_BYTES", tuning.shm_min_bytes);
  check_same_setting(comm, "DTRAIN_SHM_CHUNK_BYTES", tuning.shm_chunk_bytes);
}

std::vector<size_t> even_chunks(size_t count, int n) {
  std::vector<size_t> offsets(static_cast<size_t>(n) + 1);
  const size_t base = count / static_cast<size_t>(n);
  const size_t extra = count % static_cast<size_t>(n);
  for (size_t i = 0; i <= static_cast<size_t>(n); ++i) offsets[i] = i * base + std::min(i, extra);
  return offsets;
}

Ring::Ring(MPI_Comm comm, RingTuning tuning, std::unique_ptr<RingMemory> memory)
    : comm_(comm), tuning_(tuning), memory_(std::move(memory)), scratch_(*memory_) {
  DTRAIN_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  DTRAIN_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  left_ = mod(rank_ - 1, size_);
  right_ = mod(rank_ + 1, size_);
  tuning_.segment_bytes = std::max<size_t>(1, tuning_.segment_bytes / sizeof(float)) * sizeof(float);
}

void Ring::all_reduce(const float* send, float* recv, size_t count, float scale) {
  if (size_ == 1 || count == 0) {
    memory_->scale_copy(recv, send, count, scale);
    return;
  }
  if (count * sizeof(float) <= tuning_.small_bytes || count < static_cast<size_t>(size_)) {
    recursive_doubling(send, recv, count, scale);
    return;
  }
  const std::vector<size_t> offsets = even_chunks(count, size_);
  reduce_scatter(send, recv, offsets, scale);
  all_gather(recv, offsets, sizeof(float));
}

void Ring::reduce_scatter(const float* send, float* recv, const std::vector<size_t>& offsets, float scale) {
  const int n = size_;
  auto chunk_size = [&](int c) { return offsets[static_cast<size_t>(c) + 1] - offsets[static_cast<size_t>(c)]; };
  if (n == 1) {
    memory_->scale_copy(recv, send, offsets.back(), scale);
    return;
  }
  // Step s sends chunk (r-s-1) and reduces chunk (r-s-2) into recv, so after n-1 steps rank r holds
  // chunk r. The data sent at step 0 is our own contribution; later it is the partial sum we
  // reduced one step earlier. Our contribution to a received chunk always comes from `send`.
  for (int step = 0; step < n - 1; ++step) {
    const int send_chunk = mod(rank_ - step - 1, n);
    const int recv_chunk = mod(rank_ - step - 2, n);
    const float* outgoing = (step == 0 ? send : recv) + offsets[static_cast<size_t>(send_chunk)];
    const size_t at = offsets[static_cast<size_t>(recv_chunk)];
    exchange_and_reduce(outgoing, chunk_size(send_chunk), send + at, recv + at, chunk_size(recv_chunk),
                        step == n - 2 ? scale : 1.0f);
  }
}

void Ring::all_reduce_16(void* data, size_t count, runtime::DType dtype, float scale) {
  DTRAIN_CHECK(!memory_->where().device) << "the 16-bit-partials ring runs on host memory";
  DTRAIN_CHECK(dtype == runtime::DType::kBF16 || dtype == runtime::DType::kF16)
      << "all_reduce_16 of " << runtime::dtype_name(dtype);
  DTRAIN_CHECK(size_ > 1 && count >= static_cast<size_t>(size_)) << "all_reduce_16 needs a chunk per rank";
  auto* bytes = static_cast<unsigned char*>(data);
  const int n = size_;
  const std::vector<size_t> offsets = even_chunks(count, n);
  auto chunk_size = [&](int c) { return offsets[static_cast<size_t>(c) + 1] - offsets[static_cast<size_t>(c)]; };
  // As reduce_scatter, in place: step s sends chunk (r-s-1) (our own data at step 0, afterwards
  // the partial sum we rounded one step earlier) and adds the incoming partial of chunk (r-s-2).
  for (int step = 0; step < n - 1; ++step) {
    const int send_chunk = mod(rank_ - step - 1, n);
    const int recv_chunk = mod(rank_ - step - 2, n);
    exchange_and_reduce_16(bytes + offsets[static_cast<size_t>(send_chunk)] * 2, chunk_size(send_chunk),
                           bytes + offsets[static_cast<size_t>(recv_chunk)] * 2, chunk_size(recv_chunk), dtype,
                           step == n - 2 ? scale : 1.0f);
  }
  all_gather(data, offsets, 2);
}

void Ring::all_gather(void* buffer, const std::vector<size_t>& offsets, size_t element_bytes) {
  const int n = size_;
  auto* bytes = static_cast<unsigned char*>(buffer);
  for (int step = 0; step < n - 1; ++step) {
    const auto send_chunk = static_cast<size_t>(mod(rank_ - step, n));
    const auto recv_chunk = static_cast<size_t>(mod(rank_ - step - 1, n));
    exchange(
        bytes + offsets[send_chunk] * element_bytes, (offsets[send_chunk + 1] - offsets[send_chunk]) * element_bytes,
        bytes + offsets[recv_chunk] * element_bytes, (offsets[recv_chunk + 1] - offsets[recv_chunk]) * element_bytes);
  }
}

void Ring::exchange_and_reduce(const float* send, size_t send_n, const float* acc_in, float* acc_out, size_t recv_n,
                               float scale) {
  exchange_segments(send, send_n, recv_n, sizeof(float), [&](size_t first, const void* incoming, size_t n) {
    memory_->add_scaled(acc_out + first, acc_in + first, static_cast<const float*>(incoming), n, scale);
  });
}

void Ring::exchange_and_reduce_16(const void* send, size_t send_n, void* acc, size_t recv_n, runtime::DType dtype,
                                  float scale) {
  auto* sum = static_cast<unsigned char*>(acc);
  exchange_segments(send, send_n, recv_n, 2, [&](size_t first, const void* incoming, size_t n) {
    add_scaled_16(sum + first * 2, sum + first * 2, incoming, dtype, n, scale);
  });
}

void Ring::exchange_segments(const void* send, size_t send_n, size_t recv_n, size_t element_bytes,
                             const std::function<void(size_t, const void*, size_t)>& reduce) {
  const size_t seg = std::max<size_t>(1, tuning_.segment_bytes / element_bytes);  // elements per segment
  const size_t scratch_floats = (seg * element_bytes + sizeof(float) - 1) / sizeof(float);
  void* segments[2] = {scratch_.get(RingScratch::kSegment0, scratch_floats),
                       scratch_.get(RingScratch::kSegment1, scratch_floats)};
  const auto* out = static_cast<const unsigned char*>(send);
  const size_t send_segments = (send_n + seg - 1) / seg;
  const size_t recv_segments = (recv_n + seg - 1) / seg;

  requests_.assign(send_segments, MPI_REQUEST_NULL);
  for (size_t k = 0; k < send_segments; ++k) {
    const size_t n = std::min(seg, send_n - k * seg);
    DTRAIN_MPI_CHECK(MPI_Isend(out + k * seg * element_bytes, static_cast<int>(n * element_bytes), MPI_BYTE, right_,
                               kRingTag, comm_, &requests_[k]));
  }
  // Two receive buffers rotate: segment k+1 is in flight while segment k is reduced.
  MPI_Request recv_requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  auto post_recv = [&](size_t k) {
    const size_t n = std::min(seg, recv_n - k * seg);
    DTRAIN_MPI_CHECK(MPI_Irecv(segments[k % 2], static_cast<int>(n * element_bytes), MPI_BYTE, left_, kRingTag, comm_,
                               &recv_requests[k % 2]));
  };
  for (size_t k = 0; k < std::min<size_t>(2, recv_segments); ++k) post_recv(k);
  for (size_t k = 0; k < recv_segments; ++k) {
    wait_all_yielding(&recv_requests[k % 2], 1);
    reduce(k * seg, segments[k % 2], std::min(seg, recv_n - k * seg));
    if (k + 2 < recv_segments) post_recv(k + 2);
  }
  wait_all_yielding(requests_.data(), static_cast<int>(requests_.size()));
}

void Ring::exchange(const void* send, size_t send_bytes, void* recv, size_t recv_bytes) {
  const auto* out = static_cast<const unsigned char*>(send);
  auto* in = static_cast<unsigned char*>(recv);
  requests_.clear();
  for (size_t at = 0; at < recv_bytes; at += kMaxMessageBytes) {
    const size_t n = std::min(kMaxMessageBytes, recv_bytes - at);
    requests_.push_back(MPI_REQUEST_NULL);
    DTRAIN_MPI_CHECK(MPI_Irecv(in + at, static_cast<int>(n), MPI_BYTE, left_, kRingTag, comm_, &requests_.back()));
  }
  for (size_t at = 0; at < send_bytes; at += kMaxMessageBytes) {
    const size_t n = std::min(kMaxMessageBytes, send_bytes - at);
    requests_.push_back(MPI_REQUEST_NULL);
    DTRAIN_MPI_CHECK(MPI_Isend(out + at, static_cast<int>(n), MPI_BYTE, right_, kRingTag, comm_, &requests_.back()));
  }
  wait_all_yielding(requests_.data(), static_cast<int>(requests_.size()));
}

void Ring::recursive_doubling(const float* send, float* recv, size_t count, float scale) {
  DTRAIN_CHECK(count <= static_cast<size_t>(INT_MAX)) << "recursive doubling is for small buffers";
  const int n = size_;
  const int c = static_cast<int>(count);
  memory_->copy(recv, send, count * sizeof(float));
  float* incoming = scratch_.get(RingScratch::kIncoming, count);

  // Fold the ranks beyond the largest power of two p onto the first ones, double among p, unfold.
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int extra = n - p;
  if (rank_ >= p) {
    DTRAIN_MPI_CHECK(MPI_Send(recv, c, MPI_FLOAT, rank_ - p, kRingTag, comm_));
    DTRAIN_MPI_CHECK(MPI_Recv(recv, c, MPI_FLOAT, rank_ - p, kRingTag, comm_, MPI_STATUS_IGNORE));
    return;
  }
  if (rank_ < extra) {
    DTRAIN_MPI_CHECK(MPI_Recv(incoming, c, MPI_FLOAT, rank_ + p, kRingTag, comm_, MPI_STATUS_IGNORE));
    memory_->add_scaled(recv, recv, incoming, count, 1.0f);
  }
  for (int distance = 1; distance < p; distance *= 2) {
    const int partner = rank_ ^ distance;
    DTRAIN_MPI_CHECK(MPI_Sendrecv(recv, c, MPI_FLOAT, partner, kRingTag, incoming, c, MPI_FLOAT, partner, kRingTag,
                                  comm_, MPI_STATUS_IGNORE));
    // a + b == b + a in IEEE arithmetic, so both partners hold identical sums.
    memory_->add_scaled(recv, recv, incoming, count, 1.0f);
  }
  memory_->scale_copy(recv, recv, count, scale);
  if (rank_ < extra) DTRAIN_MPI_CHECK(MPI_Send(recv, c, MPI_FLOAT, rank_ + p, kRingTag, comm_));
}

void Ring::broadcast(void* buffer, size_t bytes, int root) {
  if (size_ == 1 || bytes == 0) return;
  // Chain root -> root+1 -> ... ; each segment is forwarded as soon as it arrives.
  const int position = mod(rank_ - root, size_);
  const bool receives = position != 0;
  const bool forwards = position != size_ - 1;
  auto* data = static_cast<unsigned char*>(buffer);
  const size_t seg = tuning_.segment_bytes;
  requests_.clear();
  for (size_t at = 0; at < bytes; at += seg) {
    const int n = static_cast<int>(std::min(seg, bytes - at));
    if (receives) DTRAIN_MPI_CHECK(MPI_Recv(data + at, n, MPI_BYTE, left_, kRingTag, comm_, MPI_STATUS_IGNORE));
    if (forwards) {
      requests_.push_back(MPI_REQUEST_NULL);
      DTRAIN_MPI_CHECK(MPI_Isend(data + at, n, MPI_BYTE, right_, kRingTag, comm_, &requests_.back()));
    }
  }
  wait_all_yielding(requests_.data(), static_cast<int>(requests_.size()));
}

}  // namespace dtrain::comm
