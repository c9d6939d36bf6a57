// Library versions in CUDA builds: run-time values, with the compile-time ones beside them.
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include <sstream>
#include <string>

#include "runtime/rank/versions.h"

namespace dtrain::runtime::detail {
namespace {

std::string dotted(int major, int minor, int patch = -1) {
  std::ostringstream text;
  text << major << '.' << minor;
  if (patch >= 0) text << '.' << patch;
  return text.str();
}

// NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
std::string nccl_code_text(int code) {
  return dotted(code / 10000, (code % 10000) / 100, code % 100);
}

// CUDA encodes major*1000 + minor*10.
std::string cuda_code_text(int code) {
  return dotted(code / 1000, (code % 1000) / 10);
}

}  // namespace

void fill_cuda_versions(LibraryVersions& versions) {
  int nccl = 0;
  versions.nccl = ncclGetVersion(&nccl) == ncclSuccess ? nccl_code_text(nccl) : "unknown";
  versions.nccl += " (built with " + nccl_code_text(NCCL_VERSION_CODE) + ")";

  const size_t cudnn = cudnnGetVersion();
  versions.cudnn =
      dotted(static_cast<int>(cudnn / 10000), static_cast<int>(cudnn % 10000 / 100), static_cast<int>(cudnn % 100));
  versions.cudnn += " (built with " + dotted(CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL) + ")";

  int runtime = 0;
  versions.cuda_runtime = cudaRuntimeGetVersion(&runtime) == cudaSuccess ? cuda_code_text(runtime) : "unknown";

  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) {
    versions.cuda_driver = cuda_code_text(driver);
  } else {
    versions.cuda_driver = "no driver";
  }
  cudaGetLastError();
}

}  // namespace dtrain::runtime::detail
