// GPU discovery in builds without CUDA: there is never a GPU.
#include "runtime/rank/gpu_binding.h"

namespace dtrain::runtime::detail {

std::vector<GpuDevice> runtime_visible_gpus() {
  return {};
}
void set_current_device(int) {}

}  // namespace dtrain::runtime::detail
