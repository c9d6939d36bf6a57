// GPU discovery in builds without CUDA: there is never a GPU.
#include "runtime/core/gpu_binding.h"

namespace dtrain::core::detail {

std::vector<GpuDevice> runtime_visible_gpus() {
  return {};
}
void set_current_device(int) {}

}  // namespace dtrain::core::detail
