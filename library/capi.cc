// The C ABI's life cycle, topology, version, error and completion functions
// (include/dtrain/dtrain.h). The collectives are in capi_collectives.cc.
#include <cstring>
#include <exception>
#include <mutex>

#include "library/abi_support.h"
#include "library/device.h"
#include "runtime/base/error.h"
#include "runtime/base/version.h"

namespace dtrain::library {
namespace {

std::mutex g_mutex;  // guards the two below
std::shared_ptr<Engine> g_engine;
bool g_shut_down = false;
thread_local std::string t_error;

int init_with(const char* function, MPI_Comm world) {
  std::lock_guard lock(g_mutex);
  if (g_engine) return fail(DTRAIN_ERR_INVALID_ARGUMENT, function, "dtrain is already initialized");
  if (g_shut_down)
    return fail(DTRAIN_ERR_NOT_INITIALIZED, function, "dtrain was shut down and cannot start again in this process");
  return guarded(function, [&] {
    g_engine = std::make_shared<Engine>(world);
    return DTRAIN_OK;
  });
}

bool mpi_initialized() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

// A topology field, -1 when not initialized.
template <typename Get>
int topology_value(Get get) {
  std::lock_guard lock(g_mutex);
  return g_engine ? get(*g_engine) : -1;
}

// Releases `handle` and waits until its operation has finished (host) or is queued on the
// library's stream (device); its failure as an AbiError.
std::shared_ptr<Completion> released_and_queued(dtrain_handle handle) {
  auto completion = running_engine()->release(handle);
  if (!completion)
    throw AbiError(DTRAIN_ERR_UNKNOWN_HANDLE, "handle: " + std::to_string(handle) + " is unknown or already waited");
  completion->wait();
  if (completion->status() != DTRAIN_OK) throw AbiError(completion->status(), completion->error());
  return completion;
}

}  // namespace

std::shared_ptr<Engine> running_engine() {
  std::lock_guard lock(g_mutex);
  if (g_engine) return g_engine;
  throw AbiError(DTRAIN_ERR_NOT_INITIALIZED, g_shut_down ? "dtrain has been shut down (dtrain_shutdown)"
                                                         : "dtrain is not initialized (call dtrain_init first)");
}

int fail(int status, const char* function, const std::string& text) {
  t_error = std::string(function) + ": " + text;
  return status;
}

}  // namespace dtrain::library

using namespace dtrain::library;  // NOLINT: the C functions below are thin

extern "C" {

const char* dtrain_version(void) {
  return DTRAIN_VERSION_STRING;
}
int dtrain_abi_version(void) {
  return DTRAIN_ABI_VERSION;
}
int dtrain_check_abi(int expected) {
  if (expected == DTRAIN_ABI_VERSION) return DTRAIN_OK;
  return fail(DTRAIN_ERR_INVALID_ARGUMENT, "dtrain_check_abi",
              "expected: the program was built for dtrain ABI " + std::to_string(expected) + ", but libdtrain.so " +
                  DTRAIN_VERSION_STRING + " has ABI " + std::to_string(DTRAIN_ABI_VERSION) +
                  "; rebuild it against this dtrain");
}

const char* dtrain_last_error(void) {
  return t_error.c_str();
}

const char* dtrain_status_name(int status) {
  static const char* const kNames[] = {"DTRAIN_OK",
                                       "DTRAIN_ERR_INVALID_ARGUMENT",
                                       "DTRAIN_ERR_NOT_INITIALIZED",
                                       "DTRAIN_ERR_MISMATCH",
                                       "DTRAIN_ERR_STALLED",
                                       "DTRAIN_ERR_MPI",
                                       "DTRAIN_ERR_UNSUPPORTED",
                                       "DTRAIN_ERR_UNKNOWN_HANDLE",
                                       "DTRAIN_ERR_SHUT_DOWN",
                                       "DTRAIN_ERR_INTERNAL"};
  return status >= 0 && status <= DTRAIN_ERR_INTERNAL ? kNames[status] : "DTRAIN_ERR_UNKNOWN_STATUS";
}

int dtrain_init(void) {
  return init_with("dtrain_init", MPI_COMM_WORLD);
}

int dtrain_init_comm(void* mpi_comm) {
  if (!mpi_initialized())
    return fail(DTRAIN_ERR_NOT_INITIALIZED, "dtrain_init_comm",
                "mpi_comm: MPI is not initialized; a communicator needs MPI_Init_thread first (or call dtrain_init)");
  if (mpi_comm == nullptr) return fail(DTRAIN_ERR_INVALID_ARGUMENT, "dtrain_init_comm", "mpi_comm: NULL");
  MPI_Comm comm;
  static_assert(sizeof(MPI_Comm) <= sizeof(void*), "MPI_Comm must fit a pointer");
  std::memcpy(&comm, &mpi_comm, sizeof(MPI_Comm));
  if (comm == MPI_COMM_NULL) return fail(DTRAIN_ERR_INVALID_ARGUMENT, "dtrain_init_comm", "mpi_comm: MPI_COMM_NULL");
  return init_with("dtrain_init_comm", comm);
}

int dtrain_init_comm_fortran(int64_t fortran_comm) {
  if (!mpi_initialized())
    return fail(DTRAIN_ERR_NOT_INITIALIZED, "dtrain_init_comm_fortran",
                "fortran_comm: MPI is not initialized; a communicator needs MPI_Init_thread first");
  const MPI_Comm comm = MPI_Comm_f2c(static_cast<MPI_Fint>(fortran_comm));
  if (comm == MPI_COMM_NULL)
    return fail(DTRAIN_ERR_INVALID_ARGUMENT, "dtrain_init_comm_fortran", "fortran_comm: MPI_COMM_NULL");
  return init_with("dtrain_init_comm_fortran", comm);
}

int dtrain_shutdown(void) {
  std::shared_ptr<Engine> engine;
  {
    std::lock_guard lock(g_mutex);
    if (!g_engine)
      return fail(DTRAIN_ERR_NOT_INITIALIZED, "dtrain_shutdown",
                  g_shut_down ? "dtrain has already been shut down" : "dtrain is not initialized");
    engine = std::move(g_engine);
    g_shut_down = true;
  }
  return guarded("dtrain_shutdown", [&] {
    engine->shutdown();
    return DTRAIN_OK;
  });
}

int dtrain_is_initialized(void) {
  std::lock_guard lock(g_mutex);
  return g_engine ? 1 : 0;
}

int dtrain_rank(void) {
  return topology_value([](Engine& e) { return e.topology().world_rank; });
}
int dtrain_size(void) {
  return topology_value([](Engine& e) { return e.topology().world_size; });
}
int dtrain_local_rank(void) {
  return topology_value([](Engine& e) { return e.topology().local_rank; });
}
int dtrain_local_size(void) {
  return topology_value([](Engine& e) { return e.topology().local_size; });
}
int dtrain_cross_rank(void) {
  return topology_value([](Engine& e) { return e.topology().node_index; });
}
int dtrain_cross_size(void) {
  return topology_value([](Engine& e) { return e.topology().node_count; });
}
int dtrain_gpu(void) {
  return topology_value([](Engine& e) { return e.gpu(); });
}

int dtrain_fusion_stats(int64_t* operations, int64_t* collectives) {
  return guarded("dtrain_fusion_stats", [&] {
    if (operations == nullptr) throw AbiError(DTRAIN_ERR_INVALID_ARGUMENT, "operations: NULL");
    if (collectives == nullptr) throw AbiError(DTRAIN_ERR_INVALID_ARGUMENT, "collectives: NULL");
    auto engine = running_engine();
    // Collectives first: an operation is counted only after its collective, so operations >= collectives
    // holds for the pair whatever runs meanwhile.
    *collectives = static_cast<int64_t>(engine->collectives_run());
    *operations = static_cast<int64_t>(engine->operations_run());
    return DTRAIN_OK;
  });
}

int dtrain_poll(dtrain_handle handle, int* done) {
  return guarded("dtrain_poll", [&] {
    if (done == nullptr) throw AbiError(DTRAIN_ERR_INVALID_ARGUMENT, "done: NULL");
    auto completion = running_engine()->find(handle);
    if (!completion)
      throw AbiError(DTRAIN_ERR_UNKNOWN_HANDLE, "handle: " + std::to_string(handle) + " is unknown or already waited");
    // A device operation is done once its work on the library's stream is.
    bool finished = completion->done();
    if (finished) {
      auto on_stream = completion->on_stream();
      finished = !on_stream || on_stream->complete();
    }
    *done = finished ? 1 : 0;
    return DTRAIN_OK;
  });
}

int dtrain_wait(dtrain_handle handle) {
  return guarded("dtrain_wait", [&] {
    auto completion = released_and_queued(handle);
    if (auto on_stream = completion->on_stream()) on_stream->synchronize();
    return DTRAIN_OK;
  });
}

int dtrain_wait_stream(dtrain_handle handle, void* stream) {
  return guarded("dtrain_wait_stream", [&] {
    auto completion = released_and_queued(handle);
    if (auto on_stream = completion->on_stream()) {
      // A failed cross-node step fails this operation; the stream waits all the same, for the
      // library's copies into the buffers, which run whatever the step did.
      std::exception_ptr failed_step;
      try {
        on_stream->finish_host_part();
      } catch (...) {
        failed_step = std::current_exception();
      }
      try {
        on_stream->make_stream_wait(stream);
      } catch (const dtrain::runtime::Error& e) {
        throw AbiError(DTRAIN_ERR_INVALID_ARGUMENT,
                       std::string("stream: could not make it wait for the operation: ") + e.what());
      }
      if (failed_step) std::rethrow_exception(failed_step);
    }
    return DTRAIN_OK;
  });
}

int dtrain_timeline_start(const char* path) {
  return guarded("dtrain_timeline_start", [&] {
    if (path == nullptr || *path == '\0') throw AbiError(DTRAIN_ERR_INVALID_ARGUMENT, "path: NULL or empty");
    running_engine()->start_timeline(path);
    return DTRAIN_OK;
  });
}

int dtrain_timeline_stop(void) {
  return guarded("dtrain_timeline_stop", [&] {
    running_engine()->stop_timeline();
    return DTRAIN_OK;
  });
}

const char* dtrain_handle_error(dtrain_handle handle) {
  try {
    auto completion = running_engine()->find(handle);
    if (completion && completion->done()) return completion->error().c_str();
  } catch (...) {
  }
  return "";
}

}  // extern "C"
