#pragma once
// RAII ownership of MPI itself (MPI_Init_thread .. MPI_Finalize) and of MPI communicators.
#include <mpi.h>

#include <string>
#include <string_view>

namespace dtrain::runtime {

// Initializes MPI for the life of the object and finalizes it on destruction. Requests
// MPI_THREAD_MULTIPLE (loader threads and the comm thread may call MPI); code that needs it checks
// the level granted with require_mpi_thread_multiple (below). MPI_COMM_WORLD is switched to
// MPI_ERRORS_RETURN so failures become exceptions.
// One per process, constructed in main.
class MpiScope {
 public:
  MpiScope(int* argc, char*** argv);
  ~MpiScope();
  MpiScope(const MpiScope&) = delete;
  MpiScope& operator=(const MpiScope&) = delete;

 private:
  bool owns_init_ = false;
};

// True between MPI_Init and MPI_Finalize.
bool mpi_is_active();

// "MPI_THREAD_MULTIPLE", ... for a thread level.
const char* mpi_thread_level_name(int level);

// The MPI library's own version line (MPI_Get_library_version), first line only.
std::string mpi_library_version();

// For code that calls MPI from threads of its own beside the main thread (the communicators'
// worker threads): an Error unless MPI granted MPI_THREAD_MULTIPLE, naming `who`, the MPI library
// and the level it granted.
void require_mpi_thread_multiple(std::string_view who);

// An owned communicator, freed on destruction; MPI_ERRORS_RETURN is set on adoption.
class MpiComm {
 public:
  MpiComm() = default;
  explicit MpiComm(MPI_Comm comm);
  ~MpiComm();
  MpiComm(MpiComm&& other) noexcept;
  MpiComm& operator=(MpiComm&& other) noexcept;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  MPI_Comm get() const { return comm_; }
  int rank() const;
  int size() const;

  // MPI_Comm_dup of `comm` (an independent message space for a library or a test).
  static MpiComm duplicate(MPI_Comm comm);
  // MPI_Comm_split of `comm`.
  static MpiComm split(MPI_Comm comm, int color, int key);

 private:
  void release() noexcept;
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace dtrain::runtime
