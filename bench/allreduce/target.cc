#include "bench/allreduce/target.h"

#include <mpi.h>

#include <utility>
#include <vector>

#include "comm/backends/factory.h"
#include "runtime/base/error.h"
#include "runtime/mpi/mpi_check.h"

namespace dtrain::bench {
namespace {

class CommunicatorTarget final : public AllReduceTarget {
 public:
  CommunicatorTarget(std::unique_ptr<comm::Communicator> communicator, bool device, void* stream)
      : comm_(std::move(communicator)), device_(device), stream_(stream) {}
  std::string name() const override { return comm_->name(); }
  bool device_buffers() const override { return device_; }
  void* stream() const override { return stream_; }
  void run(const void* send, void* recv, size_t count, comm::DType dtype, comm::ReduceOp op) override {
    const comm::Location where = device_ ? comm::Location::gpu(stream_) : comm::Location::host();
    comm::Work work = comm_->all_reduce(send, recv, count, dtype, op, where);
    if (device_) {
      pending_.push_back(std::move(work));  // checked at synchronize(): a failed call must not pass
    } else {
      work.wait();
    }
  }
  void synchronize() override {
    if (!device_) return;
    synchronize_stream(stream_);
    std::vector<comm::Work> works = std::move(pending_);
    pending_.clear();
    comm::Work::all_of(std::move(works)).wait();
  }

 private:
  std::vector<comm::Work> pending_;
  std::unique_ptr<comm::Communicator> comm_;
  bool device_;
  void* stream_;
};

// MPI_Allreduce on the calling thread: the peer our ring is measured against.
class RawMpiTarget final : public AllReduceTarget {
 public:
  explicit RawMpiTarget(MPI_Comm comm) : comm_(runtime::MpiComm::duplicate(comm)) {}
  std::string name() const override { return "raw-mpi"; }
  bool device_buffers() const override { return false; }
  void run(const void* send, void* recv, size_t count, comm::DType dtype, comm::ReduceOp op) override {
    DTRAIN_USAGE_CHECK(dtype == comm::DType::kF32 && op == comm::ReduceOp::kSum)
        << "raw-mpi measures fp32 sum only (MPI has no 16-bit float type or average)";
    DTRAIN_MPI_CHECK(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, static_cast<int>(count), MPI_FLOAT,
                                   MPI_SUM, comm_.get()));
  }

 private:
  runtime::MpiComm comm_;
};

}  // namespace

std::unique_ptr<AllReduceTarget> make_target(const std::string& backend, const runtime::RankContext& ctx, bool gpus,
                                             bool check_calls, comm::SixteenBitSum sum16) {
  if (backend == "raw-mpi") return std::make_unique<RawMpiTarget>(ctx.world());
  if (backend == "raw-nccl") return make_raw_nccl_target(ctx);
  auto communicator =
      comm::make_communicator(comm::parse_backend(backend, "--backend"), ctx, gpus, comm::DType::kF32, sum16);
  communicator->set_consistency_check(check_calls);
  const bool device = gpus && std::string(communicator->name()) != "mpi";
  return std::make_unique<CommunicatorTarget>(std::move(communicator), device, device ? make_bench_stream() : nullptr);
}

}  // namespace dtrain::bench
