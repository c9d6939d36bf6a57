#pragma once
// Versions of dtrain and of the libraries it runs against, as reported at run time (what the
// dynamic loader actually found, which on GPU hosts may differ from what we compiled against).
#include <string>

namespace dtrain::runtime {

struct LibraryVersions {
  std::string dtrain;
  std::string mpi;   // MPI_Get_library_version, first line
  std::string nccl;  // "2.28.3 (built with 2.28.3)" or "not built in"
  std::string cudnn;
  std::string cuda_runtime;
  std::string cuda_driver;  // the newest CUDA version the installed driver supports
};

LibraryVersions library_versions();

namespace detail {
// Filled by versions_cuda.cc or versions_cpu.cc.
void fill_cuda_versions(LibraryVersions& versions);
}  // namespace detail

}  // namespace dtrain::runtime
