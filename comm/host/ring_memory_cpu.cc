// The device RingMemory in builds without CUDA: there are no device buffers to reduce.
#include "comm/host/ring_memory.h"
#include "runtime/base/error.h"

namespace dtrain::comm {

std::unique_ptr<RingMemory> make_device_ring_memory(bool) {
  DTRAIN_USAGE_FAIL() << "device buffers need a CUDA build of dtrain (DTRAIN_CUDA=ON)";
}

}  // namespace dtrain::comm
