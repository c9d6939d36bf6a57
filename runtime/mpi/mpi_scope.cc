#include "runtime/mpi/mpi_scope.h"

#include <exception>
#include <utility>

#include "runtime/base/error.h"
#include "runtime/mpi/mpi_check.h"

namespace dtrain::runtime {

MpiScope::MpiScope(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  // Left alone if a test harness or an embedding program got there first. The level granted is
  // checked where MPI_THREAD_MULTIPLE is needed (require_mpi_thread_multiple), whoever initialized.
  if (!initialized) {
    int granted = MPI_THREAD_SINGLE;
    const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &granted);
    DTRAIN_CHECK(rc == MPI_SUCCESS) << "MPI_Init_thread failed with code " << rc;
    owns_init_ = true;
  }
  DTRAIN_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
}

MpiScope::~MpiScope() {
  // An exception on its way out ends the job through run_main (main_guard.h): the error line first,
  // then MPI_Abort, with the ranks that stay silent on a usage error waiting for rank 0's line.
  // Finalizing here would skip that: this rank would exit at once, and the launcher could tear
  // the job down before rank 0's message is out (seen: a job that failed with no error line).
  if (owns_init_ && mpi_is_active() && std::uncaught_exceptions() == 0) MPI_Finalize();
}

bool mpi_is_active() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

const char* mpi_thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "an unknown thread level";
  }
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "an MPI library that does not say its version";
  std::string version(text, static_cast<size_t>(length));
  const size_t end = version.find_first_of("\r\n,");
  if (end != std::string::npos) version.resize(end);
  while (!version.empty() && version.back() == ' ') version.pop_back();
  return version;
}

void require_mpi_thread_multiple(std::string_view who) {
  int level = MPI_THREAD_SINGLE;
  DTRAIN_MPI_CHECK(MPI_Query_thread(&level));
  DTRAIN_CHECK(level >= MPI_THREAD_MULTIPLE)
      << who << " and needs MPI_THREAD_MULTIPLE, but " << mpi_library_version() << " granted "
      << mpi_thread_level_name(level)
      << " (initialize MPI with MPI_Init_thread(MPI_THREAD_MULTIPLE), as runtime::MpiScope does, with an MPI built "
         "with thread support)";
}

MpiComm::MpiComm(MPI_Comm comm) : comm_(comm) {
  if (comm_ != MPI_COMM_NULL) DTRAIN_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
}

MpiComm::~MpiComm() {
  release();
}

MpiComm::MpiComm(MpiComm&& other) noexcept : comm_(std::exchange(other.comm_, MPI_COMM_NULL)) {}

MpiComm& MpiComm::operator=(MpiComm&& other) noexcept {
  if (this != &other) {
    release();
    comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
  }
  return *this;
}

void MpiComm::release() noexcept {
  if (comm_ != MPI_COMM_NULL && mpi_is_active()) MPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
}

int MpiComm::rank() const {
  int rank = -1;
  DTRAIN_MPI_CHECK(MPI_Comm_rank(comm_, &rank));
  return rank;
}

int MpiComm::size() const {
  int size = 0;
  DTRAIN_MPI_CHECK(MPI_Comm_size(comm_, &size));
  return size;
}

MpiComm MpiComm::duplicate(MPI_Comm comm) {
  MPI_Comm out = MPI_COMM_NULL;
  DTRAIN_MPI_CHECK(MPI_Comm_dup(comm, &out));
  return MpiComm(out);
}

MpiComm MpiComm::split(MPI_Comm comm, int color, int key) {
  MPI_Comm out = MPI_COMM_NULL;
  DTRAIN_MPI_CHECK(MPI_Comm_split(comm, color, key, &out));
  return MpiComm(out);
}

}  // namespace dtrain::runtime
