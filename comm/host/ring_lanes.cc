#include "comm/host/ring_lanes.h"

#include <exception>

namespace dtrain::comm {

RingLanes::RingLanes(MPI_Comm comm, RingTuning tuning, int extra_lanes) {
  for (int i = 0; i < extra_lanes; ++i) {
    comms_.push_back(runtime::MpiComm::duplicate(comm));
    rings_.push_back(std::make_unique<Ring>(comms_.back().get(), tuning));
    workers_.push_back(std::make_unique<CommWorker>());
  }
}

RingLanes::~RingLanes() {
  for (auto& w : workers_) w->stop();
}

void RingLanes::run(Ring& first, size_t count, const std::function<void(Ring&, size_t, size_t)>& part) {
  const std::vector<size_t> offsets = even_chunks(count, static_cast<int>(rings_.size()) + 1);
  std::vector<Work> lanes;
  std::exception_ptr failure;
  // A lane already queued uses `part` and the caller's buffers: whatever fails here, run() returns
  // only after every queued lane has.
  try {
    lanes.reserve(rings_.size());
    for (size_t i = 0; i < rings_.size(); ++i) {
      Ring* ring = rings_[i].get();
      const size_t begin = offsets[i + 1], n = offsets[i + 2] - offsets[i + 1];
      lanes.push_back(workers_[i]->submit([ring, begin, n, &part] { part(*ring, begin, n); }));
    }
    part(first, 0, offsets[1]);
  } catch (...) {
    failure = std::current_exception();
  }
  for (Work& w : lanes) {
    try {
      w.wait();
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace dtrain::comm
