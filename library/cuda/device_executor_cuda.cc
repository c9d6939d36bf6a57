// device.h's DeviceExecutor with the CUDA runtime: fp32, fp16 and bf16 sums and averages,
// broadcasts, equal all-gathers and reduce-scatters run on the library's stream through the job's
// device Communicator (NCCL inside a node, hierarchical across nodes), fused all-reduces packed
// into one device fusion buffer by copies on that stream. The rest (min and max, the integer and
// fp64 types, all-to-all, all-gathers of differing counts) is staged: copied into pinned host
// memory, run by the host Executor over MPI on this (background) thread, and copied back; only
// the background thread waits for the GPU then, never the caller.
//
// The background thread does not wait for a collective's host part either (hierarchical's
// cross-node step, staged through the host, which also waits for the GPU to reach the callers'
// events): it negotiates and queues the next one meanwhile, as the step's gradient buckets overlap
// in dtrain-train. The stream order keeps the results right (the copies back wait on the host
// part). The caller's waits for the operation wait for its host part (dtrain_wait_stream blocks
// until it has finished, as it did when the background thread waited for it), so a failed part
// fails the operation it belongs to on every rank, and the operations after it run as before.
//
// Rounding is the host path's: scale factors multiply in fp32 (fp16 and bf16 widened, rounded
// once), and an fp32 average is the sum times 1/size in fp32, so a device result equals the
// host one bit for bit.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <deque>
#include <exception>
#include <optional>

#include "comm/backends/factory.h"
#include "comm/cuda/convert_kernels.cuh"
#include "comm/diagnostics/consistency_check.h"
#include "include/dtrain/dtrain.h"
#include "library/cuda/stream_event_cuda.h"
#include "library/device.h"
#include "library/element_types.h"
#include "runtime/base/error.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/stream.h"

namespace dtrain::library {
namespace {

constexpr size_t kAlignment = 256;

size_t aligned(size_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

// Memory that only grows; freed at destruction (cudaFree and cudaFreeHost wait for the device).
template <bool kPinned>
class GrowingBytes {
 public:
  ~GrowingBytes() { release(); }
  GrowingBytes() = default;
  GrowingBytes(const GrowingBytes&) = delete;
  GrowingBytes& operator=(const GrowingBytes&) = delete;

  char* reserve(size_t bytes) {
    if (bytes <= size_ && data_ != nullptr) return data_;
    release();
    const size_t size = std::max<size_t>(aligned(bytes), kAlignment);
    void* p = nullptr;
    if (kPinned) {
      DTRAIN_CUDA_CHECK(cudaHostAlloc(&p, size, cudaHostAllocDefault)) << "pinned staging of " << size << " bytes";
    } else {
      DTRAIN_CUDA_CHECK(cudaMalloc(&p, size)) << "device fusion buffer of " << size << " bytes";
    }
    data_ = static_cast<char*>(p);
    size_ = size;
    return data_;
  }

 private:
  void release() {
    if (data_ == nullptr) return;
    if (kPinned) {
      cudaFreeHost(data_);
    } else {
      cudaFree(data_);
    }
    data_ = nullptr;
    size_ = 0;
  }
  char* data_ = nullptr;
  size_t size_ = 0;
};

comm::Location on(const runtime::CudaStream& stream) {
  return comm::Location::gpu(stream.get());
}

// Elements an operation reads from send, and that recv must hold.
int64_t send_elements(const Request& r, int size) {
  return r.kind == OpKind::kReduceScatter || r.kind == OpKind::kAllToAll ? r.count * size : r.count;
}
int64_t recv_elements(const Request& r, int size) {
  switch (r.kind) {
    case OpKind::kAllGather: return r.recv_capacity;
    case OpKind::kAllToAll: return r.count * size;
    default: return r.count;
  }
}

// Whether `work` has finished, well or not. A failed one is waited for (a Work of several parts
// fails at its first failed part while the others may still run), its failure left to the
// operation's waits.
bool finished(const comm::Work& work) {
  try {
    return work.test();
  } catch (...) {
    try {
      work.wait();
    } catch (...) {
    }
    return true;
  }
}

// The done event of an operation whose collective has a host part still running: complete when
// both are. Every wait for the operation waits for the host part on the host first and rethrows
// its failure (a stream could not carry it: the copies back run past a failed part), after the
// stream has the event, so the GPU's copies into the caller's buffers are ordered all the same.
class HostPartEvent final : public StreamEvent {
 public:
  HostPartEvent(std::shared_ptr<StreamEvent> event, comm::Work host_part)
      : event_(std::move(event)), host_part_(std::move(host_part)) {}
  void make_stream_wait(void* stream) override { event_->make_stream_wait(stream); }
  void finish_host_part() override { host_part_.wait(); }
  void synchronize() override {
    // The copies back are queued whatever the host part did: the GPU is done with the buffers
    // only after the event, failure or not.
    std::exception_ptr failure;
    try {
      host_part_.wait();
    } catch (...) {
      failure = std::current_exception();
    }
    event_->synchronize();
    if (failure) std::rethrow_exception(failure);
  }
  // Done well or not (dtrain_poll's contract): a failed part is done, and its waits report it.
  bool complete() override { return finished(host_part_) && event_->complete(); }

 private:
  std::shared_ptr<StreamEvent> event_;
  comm::Work host_part_;
};

class CudaDeviceExecutor final : public DeviceExecutor {
 public:
  CudaDeviceExecutor(const runtime::RankContext& ctx, int gpu, comm::Backend backend, Executor& host)
      : host_(host), stream_(bind(gpu)) {
    // Loaded now, not at a first launch that CUDA's lazy loading could hold until the GPU is idle.
    comm::cuda::load_kernels();
    // Ranks on different backends would wait in different collectives.
    comm::check_same_setting(ctx.world(), "DTRAIN_GPU_BACKEND", static_cast<uint64_t>(backend),
                             [](uint64_t b) { return comm::backend_name(static_cast<comm::Backend>(b)); });
    communicator_ = comm::make_communicator(backend, ctx, /*gpus=*/true);
    // Name matching has already compared every rank's call.
    communicator_->set_consistency_check(false);
    size_ = communicator_->size();
  }
  ~CudaDeviceExecutor() override {
    // Nothing queued may outlive the buffers freed below: the host parts first (the stream waits
    // for them), then the stream.
    for (const comm::Work& work : in_flight_) {
      try {
        work.wait();
      } catch (...) {  // reported by the operation's waits
      }
    }
    cudaStreamSynchronize(stream_.get());
  }

  void run(const Response& response, const std::vector<Operation*>& ops) override {
    // An operation that failed part way may have left host parts: kept until they finish.
    for (comm::Work& work : host_parts_) in_flight_.push_back(std::move(work));
    host_parts_.clear();
    forget_finished();
    for (Operation* op : ops) op->ready->make_stream_wait(stream_.get());
    if (on_device(response, ops.front()->request)) {
      run_on_device(response, ops);
    } else {
      staged(response, ops);
    }
    auto event = std::make_shared<CudaStreamEvent>();
    event->record(stream_.get());
    std::shared_ptr<StreamEvent> done = event;
    if (!host_parts_.empty()) {
      comm::Work work = comm::Work::all_of(std::move(host_parts_));
      host_parts_.clear();
      in_flight_.push_back(work);
      done = std::make_shared<HostPartEvent>(event, work);
    }
    for (Operation* op : ops) op->done = done;
  }

 private:
  static int bind(int gpu) {
    DTRAIN_CUDA_CHECK(cudaSetDevice(gpu)) << "binding GPU " << gpu << " to dtrain's background thread";
    return gpu;
  }

  bool on_device(const Response& response, const Request& r) const {
    switch (r.kind) {
      case OpKind::kAllReduce:
      case OpKind::kReduceScatter: return communicator_reduces(r.dtype, r.op);
      case OpKind::kBroadcast: return communicator_dtype(r.dtype).has_value();
      case OpKind::kAllGather:
        return communicator_dtype(r.dtype).has_value() &&
               std::all_of(response.counts.begin(), response.counts.end(),
                           [&](int64_t c) { return c == response.counts.front(); });
      default: return false;
    }
  }

  void run_on_device(const Response& response, const std::vector<Operation*>& ops) {
    Operation& op = *ops.front();
    const Request& r = op.request;
    const runtime::DType type = *communicator_dtype(r.dtype);
    switch (r.kind) {
      case OpKind::kAllReduce: all_reduce(ops); break;
      case OpKind::kBroadcast:
        if (r.count > 0)
          keep_host_part(communicator_->broadcast(op.recv, static_cast<size_t>(r.count), type, r.root, on(stream_)));
        break;
      case OpKind::kAllGather:
        if (op.recv_counts != nullptr) std::copy(response.counts.begin(), response.counts.end(), op.recv_counts);
        if (r.count > 0)
          keep_host_part(communicator_->all_gather(op.send, op.recv, static_cast<size_t>(r.count), type, on(stream_)));
        break;
      case OpKind::kReduceScatter:
        if (r.count > 0) reduce(op.send, op.recv, r.count, r.dtype, r.op, /*scatter=*/true);
        break;
      default: DTRAIN_FAIL() << describe(r) << " has no device path";
    }
  }

  void all_reduce(const std::vector<Operation*>& ops) {
    const Request& head = ops.front()->request;
    const size_t esize = element_size(head.dtype);
    const bool scaled = head.prescale != 1.0 || head.postscale != 1.0;
    if (ops.size() == 1) {
      Operation& op = *ops.front();
      if (head.count == 0) return;
      if (!scaled) return reduce(op.send, op.recv, head.count, head.dtype, head.op, false);
      copy(op.recv, op.send, head.count * esize);
      scale(op.recv, head.count, head.dtype, head.prescale);
      reduce(op.recv, op.recv, head.count, head.dtype, head.op, false);
      scale(op.recv, head.count, head.dtype, head.postscale);
      return;
    }
    int64_t total = 0;
    for (const Operation* op : ops) total += op->request.count;
    if (total == 0) return;
    char* buffer = fusion_.reserve(static_cast<size_t>(total) * esize);
    size_t at = 0;
    for (const Operation* op : ops) {
      copy(buffer + at, op->send, op->request.count * esize);
      at += op->request.count * esize;
    }
    scale(buffer, total, head.dtype, head.prescale);
    reduce(buffer, buffer, total, head.dtype, head.op, false);
    scale(buffer, total, head.dtype, head.postscale);
    at = 0;
    for (Operation* op : ops) {
      copy(op->recv, buffer + at, op->request.count * esize);
      at += op->request.count * esize;
    }
  }

  // All-reduce (or reduce-scatter) of `count` result elements through the device Communicator.
  void reduce(const void* send, void* recv, int64_t count, int dtype, int op, bool scatter) {
    const runtime::DType type = *communicator_dtype(dtype);
    // The host path's fp32 average: the sum, times 1/size in fp32 (NCCL's own average scales
    // before it adds, which rounds differently).
    const bool sum_then_scale = dtype == DTRAIN_FLOAT32 && op == DTRAIN_AVERAGE;
    const comm::ReduceOp how =
        op == DTRAIN_AVERAGE && !sum_then_scale ? comm::ReduceOp::kAverage : comm::ReduceOp::kSum;
    const auto n = static_cast<size_t>(count);
    if (scatter) {
      keep_host_part(communicator_->reduce_scatter(send, recv, n, type, how, on(stream_)));
    } else {
      keep_host_part(communicator_->all_reduce(send, recv, n, type, how, on(stream_)));
    }
    if (sum_then_scale) scale(recv, count, dtype, 1.0 / size_);
  }

  // Multiplies in fp32 (fp16 and bf16 widened into scratch and rounded once), as the host path.
  void scale(void* buffer, int64_t count, int dtype, double factor) {
    if (factor == 1.0 || count == 0) return;
    const auto n = static_cast<size_t>(count);
    const auto f = static_cast<float>(factor);  // as the host path: the factor in fp32
    if (dtype == DTRAIN_FLOAT32) {
      comm::cuda::launch_scale(static_cast<float*>(buffer), f, static_cast<float*>(buffer), n, stream_.get());
      return;
    }
    DTRAIN_CHECK(dtype == DTRAIN_FLOAT16 || dtype == DTRAIN_BFLOAT16) << "device scale of " << dtype_label(dtype);
    const auto half = dtype == DTRAIN_FLOAT16 ? comm::cuda::Half16::kF16 : comm::cuda::Half16::kBF16;
    auto* wide = reinterpret_cast<float*>(scratch_.reserve(n * sizeof(float)));
    comm::cuda::launch_widen(buffer, half, wide, n, stream_.get());
    comm::cuda::launch_narrow(wide, f, buffer, half, n, stream_.get());
  }

  // A device call's Work is done at once on NCCL; on hierarchical it is the cross-node step staged
  // through the host, whose failure it carries: kept with the operation's done event unless it
  // has already succeeded (one that has already failed is kept, or nothing would report it).
  void keep_host_part(const comm::Work& work) {
    bool succeeded = false;
    try {
      succeeded = work.test();
    } catch (...) {
    }
    if (!succeeded) host_parts_.push_back(work);
  }

  // Drops the host parts that have finished, failed ones too: their operations' waits report them.
  void forget_finished() {
    while (!in_flight_.empty() && finished(in_flight_.front())) in_flight_.pop_front();
  }

  void copy(void* to, const void* from, size_t bytes) {
    if (bytes == 0 || to == from) return;
    DTRAIN_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, stream_.get()));
  }

  void staged(const Response& response, const std::vector<Operation*>& ops);

  Executor& host_;
  runtime::CudaStream stream_;
  std::vector<comm::Work> host_parts_;  // the running operation's
  std::deque<comm::Work> in_flight_;    // earlier operations' host parts, oldest first
  std::unique_ptr<comm::Communicator> communicator_;
  int size_ = 1;
  GrowingBytes<false> fusion_;
  GrowingBytes<false> scratch_;  // fp32 copies of 16-bit buffers being scaled
  GrowingBytes<true> staging_;
};

// One operation's device buffers in pinned host memory (offsets into the staging arena): send and
// recv in one region when they overlap (in place), so the host Executor sees the same aliasing;
// recv is copied down only when it overlaps send, and only what the operation writes goes up.
struct StagedOp {
  Operation host;  // the operation, its pointers set to the staging copies once the arena exists
  size_t send_at = 0;
  size_t recv_at = 0;
  const char* down_from = nullptr;  // what is copied down, to down_at
  size_t down_at = 0;
  size_t down_bytes = 0;
  size_t up_bytes = 0;  // copied up from recv_at to the operation's recv
};

StagedOp plan(const Operation& op, int size, const std::vector<int64_t>& counts, size_t* arena) {
  const Request& r = op.request;
  const auto esize = static_cast<int64_t>(element_size(r.dtype));
  const auto* send = static_cast<const char*>(op.send);
  const auto* recv = static_cast<const char*>(op.recv);
  const auto send_bytes = static_cast<size_t>(send_elements(r, size) * esize);
  const auto recv_bytes = static_cast<size_t>(recv_elements(r, size) * esize);
  int64_t written = recv_elements(r, size);
  if (r.kind == OpKind::kAllGather) {
    written = 0;
    for (int64_t c : counts) written += c;
  }
  StagedOp s{op, 0, 0, send, 0, send_bytes, static_cast<size_t>(written * esize)};
  s.host.ready = nullptr;
  const bool overlap =
      send == recv || (send != nullptr && recv != nullptr && send < recv + recv_bytes && recv < send + send_bytes);
  if (overlap) {
    const char* low = std::min(send, recv);
    const char* high = std::max(send + send_bytes, recv + recv_bytes);
    s.down_from = low;
    s.down_at = *arena;
    s.down_bytes = static_cast<size_t>(high - low);
    s.send_at = *arena + static_cast<size_t>(send - low);
    s.recv_at = *arena + static_cast<size_t>(recv - low);
    *arena += aligned(std::max<size_t>(s.down_bytes, 1));
    return s;
  }
  s.send_at = s.down_at = *arena;
  *arena += aligned(std::max<size_t>(send_bytes, 1));
  s.recv_at = *arena;
  *arena += aligned(std::max<size_t>(recv_bytes, 1));
  return s;
}

void CudaDeviceExecutor::staged(const Response& response, const std::vector<Operation*>& ops) {
  std::vector<StagedOp> staged;
  size_t arena = 0;
  for (const Operation* op : ops) staged.push_back(plan(*op, size_, response.counts, &arena));
  char* base = staging_.reserve(arena);
  std::vector<Operation*> host_ops;
  for (StagedOp& s : staged) {
    s.host.send = base + s.send_at;
    s.host.recv = base + s.recv_at;
    if (s.down_bytes > 0)
      DTRAIN_CUDA_CHECK(
          cudaMemcpyAsync(base + s.down_at, s.down_from, s.down_bytes, cudaMemcpyDeviceToHost, stream_.get()));
    host_ops.push_back(&s.host);
  }
  stream_.synchronize();  // the callers' data (their events came first on this stream) is down
  host_.run(response, host_ops);
  for (size_t i = 0; i < staged.size(); ++i)
    if (staged[i].up_bytes > 0)
      DTRAIN_CUDA_CHECK(cudaMemcpyAsync(ops[i]->recv, base + staged[i].recv_at, staged[i].up_bytes,
                                        cudaMemcpyHostToDevice, stream_.get()));
  stream_.synchronize();  // the staging memory is free for the next operation
}

}  // namespace

std::unique_ptr<DeviceExecutor> DeviceExecutor::create(const runtime::RankContext& ctx, int gpu, comm::Backend backend,
                                                       Executor& host) {
  return std::make_unique<CudaDeviceExecutor>(ctx, gpu, backend, host);
}

}  // namespace dtrain::library
