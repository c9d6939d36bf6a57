#pragma once
// What the MPI library can do beyond the standard, asked in one place.
namespace dtrain::comm {

// True when the MPI library says it accepts CUDA device pointers (Open MPI's
// MPIX_Query_cuda_support; false for MPIs that cannot tell).
bool mpi_reports_cuda_support();

// How the mpi-ring backend moves device buffers, from DTRAIN_MPI_DEVICE_POINTERS:
//  - kStage ("stage"): through pinned host memory, pipelined with the device copies;
//  - kDirect ("direct"): device pointers straight to MPI, reductions as kernels on device memory;
//  - kDirectManaged ("direct-managed"): kDirect with the ring's scratch in CUDA managed memory,
//    for MPIs that handle managed but not device memory (and to test the direct path anywhere);
//  - "auto" or unset: kDirect when mpi_reports_cuda_support(), else kStage.
enum class DevicePointerMode { kStage, kDirect, kDirectManaged };
DevicePointerMode device_pointer_mode();  // UsageError naming the variable on a bad value
const char* device_pointer_mode_name(DevicePointerMode mode);

}  // namespace dtrain::comm
