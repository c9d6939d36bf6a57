#include "comm/host/mpi_features.h"

#include <mpi.h>

#include <cstdlib>
#include <string>

#include "runtime/base/error.h"
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

namespace dtrain::comm {

bool mpi_reports_cuda_support() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;  // built against an MPI that has no CUDA support compiled in, or cannot say
#endif
}

DevicePointerMode device_pointer_mode() {
  const char* value = std::getenv("DTRAIN_MPI_DEVICE_POINTERS");
  const std::string text = value ? value : "auto";
  if (text == "auto") return mpi_reports_cuda_support() ? DevicePointerMode::kDirect : DevicePointerMode::kStage;
  if (text == "stage") return DevicePointerMode::kStage;
  if (text == "direct") return DevicePointerMode::kDirect;
  if (text == "direct-managed") return DevicePointerMode::kDirectManaged;
  DTRAIN_USAGE_FAIL() << "DTRAIN_MPI_DEVICE_POINTERS='" << text
                      << "' is not a mode (use auto, stage, direct or direct-managed)";
}

const char* device_pointer_mode_name(DevicePointerMode mode) {
  switch (mode) {
    case DevicePointerMode::kStage: return "staged through pinned host memory";
    case DevicePointerMode::kDirect: return "passed to MPI directly";
    case DevicePointerMode::kDirectManaged: return "passed to MPI directly, ring scratch in managed memory";
  }
  return "unknown";
}

}  // namespace dtrain::comm
