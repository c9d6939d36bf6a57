// device.h without CUDA: the C entry points answer DTRAIN_CUDA with DTRAIN_ERR_UNSUPPORTED before
// any of these could be reached, so each only says so.
#include "include/dtrain/dtrain.h"
#include "library/device.h"
#include "library/engine.h"

namespace dtrain::library {
namespace {

[[noreturn]] void unsupported() {
  throw AbiError(DTRAIN_ERR_UNSUPPORTED, "device: DTRAIN_CUDA, but this libdtrain was built without CUDA");
}

}  // namespace

bool built_with_cuda() {
  return false;
}

void check_buffer_location(const char*, const void*, bool, int) {}

std::shared_ptr<StreamEvent> StreamEvent::record_on(void*, int) {
  unsupported();
}

std::unique_ptr<DeviceExecutor> DeviceExecutor::create(const runtime::RankContext&, int, comm::Backend, Executor&) {
  unsupported();
}

}  // namespace dtrain::library
