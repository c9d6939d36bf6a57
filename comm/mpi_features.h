#pragma once
// What the MPI library can do beyond the standard, asked in one place.
namespace dtrain::comm {

// True when the MPI library says it accepts CUDA device pointers (Open MPI's
// MPIX_Query_cuda_support; false for MPIs that cannot tell). dtrain logs it once. Its data plane
// still stages device buffers through pinned host memory either way: the direct device-pointer
// ring (device-side reductions on received segments) is not written yet.
bool mpi_reports_cuda_support();

}  // namespace dtrain::comm
