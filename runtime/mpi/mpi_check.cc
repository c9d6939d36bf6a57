#include "runtime/mpi/mpi_check.h"

namespace dtrain::runtime {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    return "MPI error code " + std::to_string(code);
  }
  return std::string(text, static_cast<size_t>(length)) + " (code " + std::to_string(code) + ")";
}

}  // namespace dtrain::runtime
