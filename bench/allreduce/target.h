#pragma once
// What dtrain-bench-allreduce measures: one all-reduce implementation behind a uniform call.
// Targets: a dtrain Communicator (any backend), and the raw peers it is compared against —
// MPI_Allreduce called directly, and ncclAllReduce called directly (CUDA builds).
#include <memory>
#include <string>

#include "comm/backends/factory.h"
#include "comm/collective.h"
#include "runtime/rank/rank_context.h"

namespace dtrain::bench {

class AllReduceTarget {
 public:
  virtual ~AllReduceTarget() = default;
  virtual std::string name() const = 0;
  virtual bool device_buffers() const = 0;
  // Runs one all-reduce to completion (host) or enqueues it on the target's stream (device).
  virtual void run(const void* send, void* recv, size_t count, comm::DType dtype, comm::ReduceOp op) = 0;
  // Waits for everything enqueued (device); no-op on the host.
  virtual void synchronize() {}
  // The stream device buffers are used on (a cudaStream_t), or nullptr.
  virtual void* stream() const { return nullptr; }
};

// backend: a dtrain backend name ("auto", "mpi-ring", ...) or "raw-mpi" / "raw-nccl".
// check_calls: dtrain's per-call consistency check (off in benchmarks, as nccl-tests has none).
// sum16: how dtrain's backends add fp16/bf16 (comm/backends/factory.h); the raw peers ignore it (raw-nccl
// always adds natively).
std::unique_ptr<AllReduceTarget> make_target(const std::string& backend, const runtime::RankContext& ctx, bool gpus,
                                             bool check_calls, comm::SixteenBitSum sum16);

// The raw NCCL peer (target_nccl_cuda.cc); a UsageError in builds without CUDA.
std::unique_ptr<AllReduceTarget> make_raw_nccl_target(const runtime::RankContext& ctx);

// Device helpers for the driver and the targets (target_nccl_cuda.cc / target_cpu.cc).
void* make_bench_stream();  // a non-blocking cudaStream_t that lives as long as the process
void synchronize_stream(void* stream);
void* device_alloc(size_t bytes);
void device_free(void* ptr);
void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);

}  // namespace dtrain::bench
