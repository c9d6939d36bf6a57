// The C ABI's job-level functions for framework bindings (include/dtrain/dtrain.h): ending the
// whole job from a failing rank, and what this build holds.
#include <mpi.h>

#include "library/abi_support.h"

using namespace dtrain::library;  // NOLINT: the C functions below are thin

extern "C" {

int dtrain_abort(int exit_code) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return fail(DTRAIN_ERR_NOT_INITIALIZED, "dtrain_abort", "MPI is not running; exit the process instead");
  // A rank that fails while the others wait in a collective would leave them waiting: only ending
  // every rank through the launcher stops the job.
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  return DTRAIN_ERR_INTERNAL;  // MPI_Abort does not return
}

int dtrain_join(int* last_rank, dtrain_handle* handle) {
  return guarded("dtrain_join", [&] {
    if (handle == nullptr) throw AbiError(DTRAIN_ERR_INVALID_ARGUMENT, "handle: NULL");
    *handle = 0;
    auto engine = running_engine();
    Request request;
    request.name = "dtrain.join";  // one join per rank at a time: a second one is "in flight"
    request.kind = OpKind::kJoin;
    *handle = engine->submit(Operation{request, nullptr, last_rank, nullptr, {}});
    return DTRAIN_OK;
  });
}

int dtrain_wait_for(dtrain_handle handle, double timeout_seconds, int* done) {
  return guarded("dtrain_wait_for", [&] {
    if (done == nullptr) throw AbiError(DTRAIN_ERR_INVALID_ARGUMENT, "done: NULL");
    if (!(timeout_seconds >= 0 && timeout_seconds <= 1e6))
      throw AbiError(DTRAIN_ERR_INVALID_ARGUMENT, "timeout_seconds: must be 0 to 1e6 seconds");
    auto completion = running_engine()->find(handle);
    if (!completion)
      throw AbiError(DTRAIN_ERR_UNKNOWN_HANDLE, "handle: " + std::to_string(handle) + " is unknown or already waited");
    *done = completion->wait_for(timeout_seconds) ? 1 : 0;
    return DTRAIN_OK;
  });
}

int dtrain_cuda_built(void) {
  return DTRAIN_LIBRARY_CUDA_BUILT;
}

}  // extern "C"
