#pragma once
// Where a GPU step's time goes, by kind of layer work: each layer call records a CUDA event pair
// around its kernels on the compute stream when a timer is installed in the GpuContext, and the
// timer adds the intervals up per kind. For finding what to fuse (dtrain-bench-train
// --op-times-steps), not for the measured steps: the events cost a little, and a captured CUDA
// graph records none (the timed steps run eager).
#include <cuda_runtime_api.h>

#include <array>
#include <vector>

#include "runtime/cuda/stream.h"

namespace dtrain::models::cuda {

class OpTimer {
 public:
  enum Kind {
    kConvForward,
    kConvDataGrad,
    kConvWeightGrad,
    kNormActForward,  // batch norm (+ residual add) (+ ReLU), statistics included
    kNormActBackward,
    kPoolForward,  // max pool and global average pool
    kPoolBackward,
    kLinearForward,
    kLinearBackward,
    kKinds
  };
  static const char* name(Kind kind);

  // An interval of `kind` from construction to destruction on the timer's stream; nothing when
  // the timer is null.
  class Scope {
   public:
    Scope(OpTimer* timer, Kind kind);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    OpTimer* timer_;
    size_t begin_ = 0;
    Kind kind_;
  };

  explicit OpTimer(cudaStream_t stream) : stream_(stream) {}
  // Waits for the last interval and adds the step's intervals to the totals.
  void collect();
  // Milliseconds per kind over every collected interval.
  const std::array<double, kKinds>& total_ms() const { return total_ms_; }

 private:
  size_t mark();

  cudaStream_t stream_;
  std::vector<runtime::CudaEvent> events_;
  size_t used_ = 0;
  struct Interval {
    Kind kind;
    size_t begin, end;
  };
  std::vector<Interval> intervals_;
  std::array<double, kKinds> total_ms_{};
};

}  // namespace dtrain::models::cuda
