// Device halves of memory_ops in builds without CUDA: unreachable, since device calls are rejected
// earlier, but defined so that the library links.
#include "comm/collective.h"
#include "runtime/base/error.h"

namespace dtrain::comm::detail {

[[noreturn]] static void no_cuda() {
  DTRAIN_USAGE_FAIL() << "device buffers need a CUDA build of dtrain";
}

void device_copy_bytes(void*, const void*, size_t, void*) {
  no_cuda();
}
void device_zero_bytes(void*, size_t, void*) {
  no_cuda();
}
void device_widen(const void*, DType, float*, size_t, void*) {
  no_cuda();
}
void device_narrow(const float*, float, void*, DType, size_t, void*) {
  no_cuda();
}

}  // namespace dtrain::comm::detail
