// Library versions in builds without CUDA.
#include "runtime/rank/versions.h"

namespace dtrain::runtime::detail {

void fill_cuda_versions(LibraryVersions& versions) {
  versions.nccl = versions.cudnn = versions.cuda_runtime = versions.cuda_driver = "not built in (DTRAIN_CUDA=OFF)";
}

}  // namespace dtrain::runtime::detail
