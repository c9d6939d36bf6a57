#include "runtime/mpi/collective_usage_check.h"

#include <sstream>
#include <string>
#include <vector>

#include "runtime/base/process_identity.h"
#include "runtime/mpi/mpi_check.h"

namespace dtrain::runtime {
namespace {

// Every rank's bytes, in rank order, on every rank.
std::vector<std::string> allgather_strings(MPI_Comm comm, const std::string& bytes) {
  int size = 0;
  DTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size));
  const int mine = static_cast<int>(bytes.size());
  std::vector<int> lengths(static_cast<size_t>(size));
  DTRAIN_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm));
  std::vector<int> offsets(lengths.size());
  int total = 0;
  for (size_t r = 0; r < lengths.size(); ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::string joined(static_cast<size_t>(total), '\0');
  DTRAIN_MPI_CHECK(
      MPI_Allgatherv(bytes.data(), mine, MPI_BYTE, joined.data(), lengths.data(), offsets.data(), MPI_BYTE, comm));
  std::vector<std::string> out;
  for (size_t r = 0; r < lengths.size(); ++r) out.push_back(joined.substr(size_t(offsets[r]), size_t(lengths[r])));
  return out;
}

}  // namespace

void throw_usage_error_once(MPI_Comm comm, const std::string* error, const char* file, int line, bool name_ranks) {
  int rank = 0;
  DTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  // "1" + detail + '\0' + host, or "0" for a rank with nothing to report.
  const std::string mine = error ? "1" + *error + '\0' + process_identity().host : std::string("0");
  const std::vector<std::string> all = allgather_strings(comm, mine);
  if (!error) {
    for (const std::string& entry : all) {
      if (entry[0] == '1')
        throw UsageReportedElsewhere(ErrorKind::kUsage, "invalid input", "", "reported by another rank", file, line);
    }
    return;
  }
  std::ostringstream ranks;
  int first = -1;
  int count = 0;
  for (size_t r = 0; r < all.size(); ++r) {
    const size_t nul = all[r].find('\0');
    if (all[r][0] != '1' || all[r].substr(1, nul - 1) != *error) continue;
    if (first < 0) first = static_cast<int>(r);
    ranks << (count++ ? ", " : "") << r << " (" << all[r].substr(nul + 1) << ")";
  }
  if (first != rank) throw UsageReportedElsewhere(ErrorKind::kUsage, "invalid input", "", *error, file, line);
  std::string text = *error;
  if (name_ranks && all.size() > 1) {
    text += count == static_cast<int>(all.size())
                ? " (on all " + std::to_string(count) + " ranks)"
                : " (on rank(s) " + ranks.str() + " of " + std::to_string(all.size()) + ")";
  }
  throw UsageError(ErrorKind::kUsage, "invalid input", "", text, file, line);
}

void collective_usage_check(MPI_Comm comm, const std::function<void()>& body) {
  std::string detail;
  const char* file = __FILE__;
  int line = __LINE__;
  bool failed = false;
  try {
    body();
  } catch (const UsageError& e) {
    detail = e.detail();
    file = e.file();
    line = e.line();
    failed = true;
  }
  throw_usage_error_once(comm, failed ? &detail : nullptr, file, line);
}

}  // namespace dtrain::runtime
