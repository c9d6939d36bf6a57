// Memory backend of builds without CUDA: nothing to pin, no device memory.
#include "runtime/core/buffer.h"
#include "runtime/core/error.h"

namespace dtrain::core::detail {

void* allocate_page_locked(size_t) {
  return nullptr;
}
void free_page_locked(void*) noexcept {}

void* allocate_device(size_t bytes, void*, int*) {
  DTRAIN_FAIL() << "device memory (" << bytes << " bytes) requested, but dtrain was built without CUDA "
                << "(configure with -DDTRAIN_CUDA=ON)";
}
void free_device(void*, int) noexcept {}

}  // namespace dtrain::core::detail
