// Library versions in builds without CUDA.
#include "runtime/core/versions.h"

namespace dtrain::core::detail {

void fill_cuda_versions(LibraryVersions& versions) {
  versions.nccl = versions.cudnn = versions.cuda_runtime = versions.cuda_driver = "not built in (DTRAIN_CUDA=OFF)";
}

}  // namespace dtrain::core::detail
