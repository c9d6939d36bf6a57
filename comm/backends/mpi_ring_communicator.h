#pragma once
// The "mpi-ring" backend: our own ring collectives (ring.h) over MPI point-to-point.
// 16-bit all-reduce runs the reduce-scatter in fp32 (widened once), rounds each rank's chunk once,
// and gathers the rounded 16-bit chunks: 1.5x the bytes of a pure 16-bit ring, but one rounding.
// With Sixteen::kPartials (the hierarchical backend's cross-node wire) host buffers take the pure
// 16-bit ring instead (Ring::all_reduce_16): half the bytes, a rounding per hop (one on 2 ranks),
// and no host-side widening of the whole buffer. Small buffers and direct device buffers keep the
// one-rounding path.
// A cross-node wire (`wire` bf16 or fp16, the trainer's gradient_wire_dtype on a flat ring across
// nodes) narrows fp32 all-reduces the way the hierarchical backend's cross-node step does: each
// rank's values are rounded once to the wire format, the ring adds in fp32 and carries its partial
// sums in 16 bits (Sixteen::kPartials, which the wire implies), and the result is widened back
// (an average is scaled in fp32 after). So on n ranks an element sees n roundings at most. Device
// buffers are narrowed on the caller's stream before staging, so the copies through the host carry
// half the bytes too. Ranks must agree on the wire (checked at construction); a communicator of
// one rank narrows nothing.
// Device buffers are staged through pinned host memory, or, when the MPI library takes device
// pointers (DTRAIN_MPI_DEVICE_POINTERS, mpi_features.h), handed to MPI directly and reduced by
// kernels: the same ring on a second Ring whose memory is the device's.
// Large host all-reduces (fp32, and 16-bit ones with one rounding, widened into fp32) go through
// memory shared by the ranks (shared_memory_allreduce.h) when every rank is on one host, unless
// DTRAIN_SHM_ALLREDUCE=0: set up at the first such call, and if it cannot be (ranks on several
// hosts, no shared memory) the ring carries them, as it does below DTRAIN_SHM_MIN_BYTES. The sum
// runs in rank order, so results are bitwise the same on every rank, as the ring's are.
// The constructor checks that every rank has the same ring tuning (a UsageError naming
// DTRAIN_RING_SEGMENT_BYTES or DTRAIN_RING_SMALL_BYTES and the values): ranks cutting messages
// differently would otherwise corrupt memory or hang.
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "comm/backends/host_communicator.h"
#include "comm/host/mpi_features.h"
#include "comm/host/ring.h"
#include "comm/host/ring_lanes.h"
#include "comm/host/shared_memory_allreduce.h"
#include "runtime/memory/buffer.h"

namespace dtrain::comm {

class MpiRingCommunicator final : public HostCommunicator {
 public:
  // How 16-bit all-reduces travel: partial sums in fp32 (one rounding) or in 16 bits.
  enum class Sixteen { kOneRounding, kPartials };
  MpiRingCommunicator(MPI_Comm comm, RingTuning tuning, Sixteen sixteen = Sixteen::kOneRounding,
                      DType wire = DType::kF32);
  ~MpiRingCommunicator() override { stop_worker(); }
  const char* name() const override { return "mpi-ring"; }
  Work submit(const Collective& call) override;
  // How many host all-reduces (or pieces of staged ones) took the lanes so far.
  long lane_runs() const { return lane_runs_.load(); }

 private:
  void run(const Collective& call) override;
  bool takes_device_pointers() const override { return device_mode_ != DevicePointerMode::kStage; }
  // The ring for this call's memory (the device ring is made on the worker, at first use).
  Ring& ring_for(const Collective& call);
  void all_reduce(Ring& ring, const Collective& call);
  // Whether `call` crosses in wire_ (an fp32 all-reduce among 2 or more ranks with a 16-bit wire).
  bool narrows(const Collective& call) const;
  // The 16-bit all-reduce (a sum) that carries `call` on the wire, on `wire` (count elements).
  Collective on_wire(const Collective& call, void* wire) const;
  // The device buffer a device call is narrowed into. Direct-managed mode hands it to an MPI that
  // reads managed but not device memory, so there it is managed: one per caller stream, reused
  // (the stream widens a call's wire before it narrows the next call into it); an outgrown one
  // stays allocated, as queued work may still read it, until the communicator goes.
  runtime::Buffer device_wire(size_t bytes, const Location& where, void** data);
  // The shared-memory all-reduce for a host all-reduce of `bytes` (fp32) on `ring`, or null: the
  // ring's. Made at the first call that qualifies (every rank reaches it at the same call).
  SharedMemoryAllReduce* shared_memory_for(Ring& ring, size_t bytes);
  void reduce_scatter(Ring& ring, const Collective& call);
  void all_gather(Ring& ring, const Collective& call);
  // Runs part(ring, begin, n) over [0, count): once on `ring`, or, for a large host all-reduce
  // (`bytes`), on tuning_.lanes rings at once (ring_lanes.h, made with the communicator).
  bool takes_lanes(Ring& ring, size_t bytes) const;
  void in_parts(Ring& ring, size_t count, size_t bytes, const std::function<void(Ring&, size_t, size_t)>& part);

  RingTuning tuning_;
  Sixteen sixteen_;
  DType wire_;
  DevicePointerMode device_mode_;
  Ring host_ring_;
  std::unique_ptr<Ring> device_ring_;
  std::unique_ptr<RingLanes> lanes_;  // with 2 or more lanes and ranks
  std::atomic<long> lane_runs_{0};
  std::unique_ptr<SharedMemoryAllReduce> shm_;
  bool shm_tried_ = false;
  std::mutex managed_wire_mutex_;
  std::unique_ptr<RingMemory> managed_wire_memory_;
  std::map<void*, std::pair<RingMemory::Block, size_t>> managed_wires_;  // by stream: buffer, bytes
};

}  // namespace dtrain::comm
