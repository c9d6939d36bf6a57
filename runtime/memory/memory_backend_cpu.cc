// Memory backend of builds without CUDA: nothing to pin, no device memory.
#include "runtime/base/error.h"
#include "runtime/memory/buffer.h"

namespace dtrain::runtime::detail {

void* allocate_page_locked(size_t) {
  return nullptr;
}
void free_page_locked(void*) noexcept {}

void* allocate_device(size_t bytes, void*, int*) {
  DTRAIN_FAIL() << "device memory (" << bytes << " bytes) requested, but dtrain was built without CUDA "
                << "(configure with -DDTRAIN_CUDA=ON)";
}
void free_device(void*, int) noexcept {}

}  // namespace dtrain::runtime::detail
