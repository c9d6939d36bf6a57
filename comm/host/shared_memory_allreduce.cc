#include "comm/host/shared_memory_allreduce.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "comm/host/host_reduce.h"
#include "runtime/base/error.h"
#include "runtime/mpi/mpi_check.h"

namespace dtrain::comm {
namespace {

// Each counter on a line of its own (two cache lines: adjacent-line prefetchers pair them), so a
// rank publishing one does not disturb the peers polling the other.
constexpr size_t kCounterStride = 128;
constexpr size_t kHeaderBytes = 2 * kCounterStride;
constexpr size_t kAlignFloats = 32;  // slots, pieces and sub-ranges start on 128-byte boundaries
// Tiles of the sum: the partial sum of a tile stays in L1 while each rank's slot is added to it.
constexpr size_t kTileFloats = 2048;

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

int64_t load_acquire(int64_t* counter) {
  return std::atomic_ref<int64_t>(*counter).load(std::memory_order_acquire);
}

void store_release(int64_t* counter, int64_t value) {
  std::atomic_ref<int64_t>(*counter).store(value, std::memory_order_release);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins for `spin_rounds` rounds (a few microseconds each), then yields, then, after 50 ms, naps:
// a peer that is a moment behind costs no context switch, one that is descheduled gets the core,
// one that arrives late (ranks reach a call milliseconds apart in training) is seen at once, as by
// MPI's busy-polling, and one that never comes costs no CPU while the stall inspector decides.
void wait_until(int64_t* counter, int64_t seq, int spin_rounds) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point yielding_since;
  for (int round = 0;; ++round) {
    for (int i = 0; i < 64; ++i) {
      if (load_acquire(counter) >= seq) return;
      cpu_relax();
    }
    if (round < spin_rounds) continue;
    const Clock::time_point now = Clock::now();
    if (round == spin_rounds) yielding_since = now;
    if (now - yielding_since < std::chrono::milliseconds(50)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

std::atomic<uint64_t> g_segments{0};  // makes segment names unique within a process

}  // namespace

SharedMemoryAllReduce::SharedMemoryAllReduce(int rank, int size, size_t chunk_floats)
    : rank_(rank), size_(size), chunk_(chunk_floats), peers_(static_cast<size_t>(size)) {
  // More ranks than cores: a spinning rank would hold the core the rank it waits for needs.
  const unsigned cores = std::thread::hardware_concurrency();
  spin_rounds_ = cores != 0 && static_cast<unsigned>(size) > cores ? 0 : 64;
  piece_floats_ = round_up((chunk_ + static_cast<size_t>(size_) - 1) / static_cast<size_t>(size_), kAlignFloats);
}

SharedMemoryAllReduce::~SharedMemoryAllReduce() {
  for (Peer& peer : peers_) {
    if (peer.base) munmap(peer.base, segment_bytes());
  }
}

size_t SharedMemoryAllReduce::segment_bytes() const {
  return round_up(kHeaderBytes + 2 * (chunk_ + piece_floats_) * sizeof(float), 4096);
}

int64_t* SharedMemoryAllReduce::copied(int r) const {
  return reinterpret_cast<int64_t*>(peers_[static_cast<size_t>(r)].base);
}

int64_t* SharedMemoryAllReduce::reduced(int r) const {
  return reinterpret_cast<int64_t*>(peers_[static_cast<size_t>(r)].base + kCounterStride);
}

float* SharedMemoryAllReduce::slot(int r, int64_t seq) const {
  auto* slots = reinterpret_cast<float*>(peers_[static_cast<size_t>(r)].base + kHeaderBytes);
  return slots + static_cast<size_t>(seq % 2) * chunk_;
}

float* SharedMemoryAllReduce::result(int r, int64_t seq) const {
  auto* pieces = reinterpret_cast<float*>(peers_[static_cast<size_t>(r)].base + kHeaderBytes) + 2 * chunk_;
  return pieces + static_cast<size_t>(seq % 2) * piece_floats_;
}

size_t SharedMemoryAllReduce::piece(size_t n) const {
  return round_up((n + static_cast<size_t>(size_) - 1) / static_cast<size_t>(size_), kAlignFloats);
}

std::unique_ptr<SharedMemoryAllReduce> SharedMemoryAllReduce::create(MPI_Comm comm, size_t chunk_bytes,
                                                                     std::string* why) {
  int rank = 0;
  int size = 1;
  DTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  DTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size));
  MPI_Comm local = MPI_COMM_NULL;
  DTRAIN_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
  int local_size = 0;
  DTRAIN_MPI_CHECK(MPI_Comm_size(local, &local_size));
  DTRAIN_MPI_CHECK(MPI_Comm_free(&local));
  int one_host = local_size == size ? 1 : 0;
  DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &one_host, 1, MPI_INT, MPI_MIN, comm));
  if (!one_host) return nullptr;
  const size_t chunk = round_up(std::max<size_t>(chunk_bytes / sizeof(float), 1), kAlignFloats);
  std::unique_ptr<SharedMemoryAllReduce> shm(new SharedMemoryAllReduce(rank, size, chunk));
  const size_t bytes = shm->segment_bytes();

  // This rank's segment: created, sized, mapped and first touched here.
  char name[64];
  std::snprintf(name, sizeof(name), "/dtrain-allreduce-%d-%d-%llu", static_cast<int>(getpid()), rank,
                static_cast<unsigned long long>(g_segments.fetch_add(1)));
  std::string error;
  auto map = [&](const char* segment, int flags) -> unsigned char* {
    const int fd = shm_open(segment, flags, 0600);
    if (fd < 0) {
      error = std::string("shm_open ") + segment + ": " + std::strerror(errno);
      return nullptr;
    }
    // posix_fallocate, not ftruncate: a /dev/shm too small fails here, not with SIGBUS at first touch.
    const int reserved = (flags & O_CREAT) ? posix_fallocate(fd, 0, static_cast<off_t>(bytes)) : 0;
    if (reserved != 0) {
      error = std::string("posix_fallocate ") + segment + " (" + std::to_string(bytes) +
              " bytes): " + std::strerror(reserved);
      close(fd);
      return nullptr;
    }
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
      error = std::string("mmap ") + segment + ": " + std::strerror(errno);
      return nullptr;
    }
    return static_cast<unsigned char*>(base);
  };
  Peer& own = shm->peers_[static_cast<size_t>(rank)];
  own.base = map(name, O_CREAT | O_EXCL | O_RDWR);
  if (!own.base) shm_unlink(name);  // created but not sized or mapped (no-op if never created)
  if (own.base) std::memset(own.base, 0, bytes);

  std::vector<char> names(static_cast<size_t>(size) * sizeof(name));
  DTRAIN_MPI_CHECK(MPI_Allgather(name, sizeof(name), MPI_CHAR, names.data(), sizeof(name), MPI_CHAR, comm));
  for (int r = 0; r < size && own.base; ++r) {
    if (r == rank) continue;
    shm->peers_[static_cast<size_t>(r)].base = map(&names[static_cast<size_t>(r) * sizeof(name)], O_RDWR);
    if (!shm->peers_[static_cast<size_t>(r)].base) break;
  }
  int ok = error.empty() ? 1 : 0;
  DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm));
  // Every rank has mapped (or failed to map) every segment: the names can go.
  if (own.base) shm_unlink(name);
  if (!ok) {
    if (why) *why = error.empty() ? "another rank could not map the shared memory" : error;
    return nullptr;
  }
  return shm;
}

void SharedMemoryAllReduce::wait_all(int64_t* (SharedMemoryAllReduce::*counter)(int) const, int64_t seq) const {
  for (int r = 0; r < size_; ++r) wait_until((this->*counter)(r), seq, spin_rounds_);
}

void SharedMemoryAllReduce::reduce_piece(int64_t seq, size_t n, float scale, const float* own) {
  const size_t width = piece(n);
  const size_t from = std::min(n, static_cast<size_t>(rank_) * width);
  const size_t len = std::min(n, from + width) - from;
  float* out = result(rank_, seq);
  auto source = [&](int q) { return q == rank_ ? own : slot(q, seq); };
  for (size_t t = 0; t < len; t += kTileFloats) {
    const size_t m = std::min(kTileFloats, len - t);
    const size_t at = from + t;
    // Rank order 0, 1, ..., n-1 on every rank: one chain per element; the scale with the last add.
    if (size_ == 1) {
      scale_copy(out + t, source(0) + at, m, scale);
      continue;
    }
    add_scaled(out + t, source(0) + at, source(1) + at, m, size_ == 2 ? scale : 1.0f);
    for (int q = 2; q < size_; ++q) add_scaled(out + t, out + t, source(q) + at, m, q == size_ - 1 ? scale : 1.0f);
  }
}

void SharedMemoryAllReduce::all_reduce(const void* send, void* recv, size_t count, runtime::DType dtype, float scale) {
  DTRAIN_CHECK(dtype == runtime::DType::kF32 || dtype == runtime::DType::kBF16 || dtype == runtime::DType::kF16)
      << "shared-memory all-reduce of " << runtime::dtype_name(dtype);
  if (count == 0) return;
  const size_t esize = runtime::dtype_size(dtype);
  const auto* in = static_cast<const unsigned char*>(send);
  auto* out = static_cast<unsigned char*>(recv);
  const size_t chunks = (count + chunk_ - 1) / chunk_;
  auto length = [&](size_t k) { return std::min(chunk_, count - k * chunk_); };
  // Only this rank sums its own sub-range, so an fp32 chunk's is read from `send` and not copied;
  // 16-bit input is widened whole into the slot, and the fp32 result rounded once on its way out.
  auto own = [&](size_t k, int64_t seq) {
    return dtype == runtime::DType::kF32 ? reinterpret_cast<const float*>(in) + k * chunk_ : slot(rank_, seq);
  };
  auto copy_in = [&](size_t k, int64_t seq) {
    const size_t n = length(k);
    if (dtype != runtime::DType::kF32) {
      widen_to_f32(in + k * chunk_ * esize, dtype, slot(rank_, seq), n);
      return;
    }
    const size_t mine = std::min(n, static_cast<size_t>(rank_) * piece(n));
    const size_t after = std::min(n, mine + piece(n));
    std::memcpy(slot(rank_, seq), own(k, seq), mine * sizeof(float));
    std::memcpy(slot(rank_, seq) + after, own(k, seq) + after, (n - after) * sizeof(float));
  };
  const int64_t first = seq_ + 1;
  // Slot first % 2 was last read by the sums of chunk first - 2, which every rank finished before
  // this rank's last wait (reduced >= first - 1).
  copy_in(0, first);
  store_release(copied(rank_), first);
  for (size_t k = 0; k < chunks; ++k) {
    const int64_t seq = first + static_cast<int64_t>(k);
    const size_t n = length(k);
    // Every rank has copied chunk seq, so it has also finished copying out chunk seq - 2, which
    // read the result pieces this sum overwrites.
    wait_all(&SharedMemoryAllReduce::copied, seq);
    reduce_piece(seq, n, scale, own(k, seq));
    store_release(reduced(rank_), seq);
    if (k + 1 < chunks) {
      // The other slot was last read by the sums of chunk seq - 1: every rank finished them before
      // this rank's previous wait on `reduced`.
      copy_in(k + 1, seq + 1);
      store_release(copied(rank_), seq + 1);
    }
    wait_all(&SharedMemoryAllReduce::reduced, seq);
    const size_t width = piece(n);
    for (int r = 0; r < size_ && static_cast<size_t>(r) * width < n; ++r) {
      const size_t from = static_cast<size_t>(r) * width;
      const size_t len = std::min(n, from + width) - from;
      unsigned char* to = out + (k * chunk_ + from) * esize;
      if (dtype == runtime::DType::kF32) {
        std::memcpy(to, result(r, seq), len * sizeof(float));
      } else {
        narrow_from_f32(result(r, seq), 1.0f, to, dtype, len);
      }
    }
  }
  seq_ = first + static_cast<int64_t>(chunks) - 1;
}

}  // namespace dtrain::comm
