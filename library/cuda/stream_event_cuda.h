#pragma once
// device.h's StreamEvent as a CUDA event (timing off), for the two CUDA sources of library/cuda/.
#include <cuda_runtime_api.h>

#include "library/device.h"
#include "runtime/cuda/stream.h"

namespace dtrain::library {

class CudaStreamEvent final : public StreamEvent {
 public:
  void record(cudaStream_t stream);
  void make_stream_wait(void* stream) override;
  void synchronize() override;
  bool complete() override;

 private:
  runtime::CudaEvent event_;
};

}  // namespace dtrain::library
