#pragma once
// Several rings at once over one group of ranks, each on its own duplicate of the communicator and
// its own thread: a large host all-reduce is cut into one contiguous part per lane, and the parts
// travel side by side (as NCCL's channels do). One ring is one thread copying every byte in and out
// of MPI's transport and adding it; on the 2-GPU machines that thread moved 4 MiB per ms, and a
// staged cross-node step of ResNet-50's gradients was bound by it
// (bench/results/2026-11-23_h200x2/wire_trace: each 4 MiB piece waited for the previous one).
//
// Two lanes by default (DTRAIN_RING_LANES). Over Open MPI's shared-memory transport with single
// copy disabled (the GPU hosts set btl_vader_single_copy_mechanism=none), ResNet-50's staged
// gradients across 4 simulated nodes of one GPU with the bf16 wire (the 16-bit-partials ring,
// whose thread widens, adds and rounds every element) trained 14% faster with 2 lanes than with
// one (mean of eight interleaved rounds on three 4-H200 machines, ahead in every round by 1-34%),
// and steadier; 4 lanes were no faster than 2 (bench/results/2026-11-28_h200x4/ring_lanes). The
// fp32 ring and the 2-rank rings of 2 simulated nodes x 2 GPUs neither gained nor lost there; on a
// 2-GPU machine (2 simulated nodes of one GPU) 2 lanes were 2-13% faster, and 4 lanes with each
// rank bound to one core (mpirun's default at 2 ranks) halved a staged all-reduce's speed
// (bench/results/2026-11-28_h200x2/ring_lanes). An earlier build on that kind had 2 and 4 lanes
// 2.7x and 12x slower on a 2-rank staged all-reduce (bench/results/2026-11-23_h200x2/lanes):
// measure on a new fabric, and set 1 where lanes queue on the transport instead of copying side
// by side.
//
// Every rank must use the same lane count (DTRAIN_RING_LANES, RingTuning::lanes; checked with the
// rest of the tuning). Each lane's result is bitwise the same on every rank; which ranks sum an
// element in which order depends on the lane count, so different counts give results that differ
// in the last bits. A lane that fails makes run() rethrow once every lane has returned.
#include <mpi.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "comm/host/comm_worker.h"
#include "comm/host/ring.h"
#include "runtime/mpi/mpi_scope.h"

namespace dtrain::comm {

class RingLanes {
 public:
  // Collective over `comm`: duplicates it `extra_lanes` times.
  RingLanes(MPI_Comm comm, RingTuning tuning, int extra_lanes);
  ~RingLanes();
  RingLanes(const RingLanes&) = delete;
  RingLanes& operator=(const RingLanes&) = delete;

  // Splits [0, count) into extra_lanes + 1 even parts and runs part(ring, begin, n) for each at
  // once: the first on the calling thread with `first`, the others on the lanes' threads and rings.
  void run(Ring& first, size_t count, const std::function<void(Ring&, size_t begin, size_t n)>& part);

 private:
  std::vector<runtime::MpiComm> comms_;
  std::vector<std::unique_ptr<Ring>> rings_;
  std::vector<std::unique_ptr<CommWorker>> workers_;  // last: threads stop before the rings go
};

}  // namespace dtrain::comm
