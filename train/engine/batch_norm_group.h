#pragma once
// The BN groups of synchronized batch norm (--bn_sync_group N; models/batch_stats_reducer.h): the
// ranks are grouped consecutively, group = world rank / N, as MLPerf's BN groups are, so a group
// sits on one node whenever N divides the ranks per node.
//
// Each group exchanges its statistics over an MPI communicator of its own (MPI_Comm_split of the
// world), not over the gradient communicator: the gradient buckets are all-reduced on that one's
// worker thread while backward runs, and BN's exchanges, made from the thread running backward,
// must not interleave with them. The exchange is a blocking MPI_Allgather of a few doubles per
// channel, watched by the stall inspector: a rank that stops while its group waits is named. That
// wait is the cost of synchronized BN: every BN layer's forward and backward waits for the
// slowest rank of its group, and on GPUs for its own GPU too (the statistics travel through the
// host, models/cuda/batch_norm.h), so a step no longer runs ahead of the GPU. Any backend works.
#include <memory>

#include "models/batch_stats_reducer.h"
#include "runtime/rank/rank_context.h"

namespace dtrain::train {

// UsageError naming bn_sync_group and the world size unless 1 <= group <= world size and group
// divides the world size.
void check_bn_sync_group(int group, int world_size);

// The reducer of this rank's group: collective over ctx.world(), which every rank calls with the
// same group. Null for group 1, at once (nothing to synchronize: no communicator, no collective).
std::unique_ptr<models::BatchStatsReducer> make_batch_norm_group(const runtime::RankContext& ctx, int group);

}  // namespace dtrain::train
