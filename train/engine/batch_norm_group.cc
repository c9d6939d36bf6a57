#include "train/engine/batch_norm_group.h"

#include <mpi.h>

#include "comm/diagnostics/stall_inspector.h"
#include "runtime/base/error.h"
#include "runtime/mpi/mpi_check.h"
#include "runtime/mpi/mpi_scope.h"

namespace dtrain::train {
namespace {

class MpiBatchNormGroup final : public models::BatchStatsReducer {
 public:
  MpiBatchNormGroup(MPI_Comm world, int world_rank, int group)
      : comm_(runtime::MpiComm::split(world, world_rank / group, world_rank)),
        stall_(comm_.get()),
        size_(comm_.size()) {}

  int group_size() const override { return size_; }

  void all_gather(const double* mine, size_t count, double* all) override {
    const comm::StallChannel::Operation watched(stall_, "synchronized batch norm all-gather");
    DTRAIN_MPI_CHECK(MPI_Allgather(mine, static_cast<int>(count), MPI_DOUBLE, all, static_cast<int>(count), MPI_DOUBLE,
                                   comm_.get()));
  }

 private:
  runtime::MpiComm comm_;
  comm::StallChannel stall_;  // after comm_: duplicates it
  int size_;
};

}  // namespace

void check_bn_sync_group(int group, int world_size) {
  DTRAIN_USAGE_CHECK(group >= 1) << "bn_sync_group " << group
                                 << " is not a group size: use 1 (off) or a divisor of the world size " << world_size;
  DTRAIN_USAGE_CHECK(group <= world_size && world_size % group == 0)
      << "bn_sync_group " << group << " does not divide the world size " << world_size
      << " (the ranks are grouped consecutively, group = rank / bn_sync_group)";
}

std::unique_ptr<models::BatchStatsReducer> make_batch_norm_group(const runtime::RankContext& ctx, int group) {
  const runtime::Topology& t = ctx.topology();
  check_bn_sync_group(group, t.world_size);
  if (group == 1) return nullptr;
  return std::make_unique<MpiBatchNormGroup>(ctx.world(), t.world_rank, group);
}

}  // namespace dtrain::train
