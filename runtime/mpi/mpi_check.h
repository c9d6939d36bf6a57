#pragma once
// DTRAIN_MPI_CHECK(call): turns a non-success MPI return code into an MpiError carrying
// MPI_Error_string's text. Our communicators use MPI_ERRORS_RETURN (rank_context.cc), so MPI
// failures come back as codes instead of aborting inside the library.
#include <mpi.h>

#include <string>

#include "runtime/base/error.h"

namespace dtrain::runtime {

// MPI_Error_string for `code`, prefixed with its error class name where MPI knows it.
std::string mpi_error_text(int code);

}  // namespace dtrain::runtime

#define DTRAIN_MPI_CHECK(call)                                      \
  for (int dtrain_mpi_rc_ = (call); dtrain_mpi_rc_ != MPI_SUCCESS;) \
  DTRAIN_ERROR_STREAM_(::dtrain::runtime::ErrorKind::kMpi, #call, ::dtrain::runtime::mpi_error_text(dtrain_mpi_rc_))
