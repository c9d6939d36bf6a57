#include "runtime/mpi/mpi_gather.h"

#include <limits>

#include "runtime/mpi/mpi_check.h"

namespace dtrain::runtime {

std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& bytes, int root) {
  int rank = 0;
  int size = 0;
  DTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  DTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size));
  DTRAIN_CHECK(bytes.size() <= static_cast<size_t>(std::numeric_limits<int>::max()))
      << "gather of " << bytes.size() << " bytes exceeds MPI's int count";
  const int my_length = static_cast<int>(bytes.size());

  std::vector<int> lengths(rank == root ? static_cast<size_t>(size) : 0);
  DTRAIN_MPI_CHECK(MPI_Gather(&my_length, 1, MPI_INT, lengths.data(), 1, MPI_INT, root, comm));

  std::vector<int> offsets(lengths.size());
  size_t total = 0;
  for (size_t r = 0; r < lengths.size(); ++r) {
    offsets[r] = static_cast<int>(total);
    total += static_cast<size_t>(lengths[r]);
  }
  DTRAIN_CHECK(total <= static_cast<size_t>(std::numeric_limits<int>::max())) << "gathered bytes exceed int";
  std::string joined(total, '\0');
  DTRAIN_MPI_CHECK(MPI_Gatherv(bytes.data(), my_length, MPI_BYTE, joined.data(), lengths.data(), offsets.data(),
                               MPI_BYTE, root, comm));

  std::vector<std::string> out;
  for (size_t r = 0; r < lengths.size(); ++r) {
    out.push_back(joined.substr(static_cast<size_t>(offsets[r]), static_cast<size_t>(lengths[r])));
  }
  return out;
}

}  // namespace dtrain::runtime
