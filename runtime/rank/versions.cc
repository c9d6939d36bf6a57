#include "runtime/rank/versions.h"

#include <mpi.h>

#include "runtime/base/version.h"

namespace dtrain::runtime {

LibraryVersions library_versions() {
  LibraryVersions versions;
  versions.dtrain = DTRAIN_VERSION_STRING;
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(mpi, &length);
  // Some MPIs count the terminating NUL in `length`; keep the first line, without trailing junk.
  versions.mpi = std::string(mpi, static_cast<size_t>(length));
  versions.mpi = versions.mpi.substr(0, versions.mpi.find_first_of(std::string("\n\0", 2)));
  while (!versions.mpi.empty() && (versions.mpi.back() == ' ' || versions.mpi.back() == ',')) versions.mpi.pop_back();
  detail::fill_cuda_versions(versions);
  return versions;
}

}  // namespace dtrain::runtime
