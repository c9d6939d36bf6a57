#include "comm/diagnostics/consistency_check.h"

#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/base/error.h"
#include "runtime/io/fingerprint.h"
#include "runtime/mpi/mpi_agreement.h"
#include "runtime/mpi/mpi_check.h"

namespace dtrain::comm {
namespace {

// The fields that must agree, in a fixed layout (no padding garbage) for hashing and exchange.
struct Signature {
  uint64_t count;
  int32_t root;
  uint8_t kind;
  uint8_t dtype;
  uint8_t op;
  uint8_t device;
};

Signature signature_of(const Collective& c) {
  Signature s;
  std::memset(&s, 0, sizeof(s));
  s.count = c.kind == CollectiveKind::kBarrier ? 0 : c.count;
  s.root = c.kind == CollectiveKind::kBroadcast ? c.root : 0;
  s.kind = static_cast<uint8_t>(c.kind);
  s.dtype = c.kind == CollectiveKind::kBarrier ? 0 : static_cast<uint8_t>(c.dtype);
  const bool reduces = c.kind == CollectiveKind::kAllReduce || c.kind == CollectiveKind::kReduceScatter;
  s.op = reduces ? static_cast<uint8_t>(c.op) : 0;
  s.device = c.where.device ? 1 : 0;
  return s;
}

Collective collective_of(const Signature& s) {
  Collective c;
  c.count = s.count;
  c.root = s.root;
  c.kind = static_cast<CollectiveKind>(s.kind);
  c.dtype = static_cast<DType>(s.dtype);
  c.op = static_cast<ReduceOp>(s.op);
  c.where.device = s.device != 0;
  return c;
}

}  // namespace

void check_same_collective(MPI_Comm comm, const Collective& call) {
  const Signature mine = signature_of(call);
  if (runtime::same_on_every_rank(comm, runtime::fingerprint(&mine, sizeof(mine)))) return;

  int size = 0;
  DTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<Signature> all(static_cast<size_t>(size));
  DTRAIN_MPI_CHECK(MPI_Allgather(&mine, sizeof(Signature), MPI_BYTE, all.data(), sizeof(Signature), MPI_BYTE, comm));
  // Group ranks by what they called: "ranks 0,2: all_reduce(count=8, ...); rank 1: all_reduce(count=7, ...)".
  std::map<std::string, std::string> ranks_by_call;
  for (int r = 0; r < size; ++r) {
    std::string& ranks = ranks_by_call[describe(collective_of(all[static_cast<size_t>(r)]))];
    if (!ranks.empty()) ranks += ',';
    ranks += std::to_string(r);
  }
  std::ostringstream message;
  message << "ranks called different collectives at the same point:";
  for (const auto& [call_text, ranks] : ranks_by_call) {
    message << " rank" << (ranks.find(',') == std::string::npos ? " " : "s ") << ranks << ": " << call_text << ";";
  }
  DTRAIN_FAIL() << message.str() << " every rank must pass the same count, dtype, op and root";
}

void check_same_setting(MPI_Comm comm, const char* name, uint64_t value,
                        const std::function<std::string(uint64_t)>& describe) {
  if (runtime::same_on_every_rank(comm, value)) return;
  int size = 0;
  DTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<uint64_t> all(static_cast<size_t>(size));
  DTRAIN_MPI_CHECK(MPI_Allgather(&value, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm));
  // "65536 on ranks 0,2; 131072 on rank 1", ranks numbered within `comm`.
  std::map<uint64_t, std::string> ranks_by_value;
  for (int r = 0; r < size; ++r) {
    std::string& ranks = ranks_by_value[all[static_cast<size_t>(r)]];
    if (!ranks.empty()) ranks += ',';
    ranks += std::to_string(r);
  }
  std::ostringstream values;
  for (const auto& [v, ranks] : ranks_by_value) {
    if (values.tellp() > 0) values << "; ";
    values << (describe ? describe(v) : std::to_string(v)) << " on rank"
           << (ranks.find(',') == std::string::npos ? " " : "s ") << ranks;
  }
  // Environment variables get the launcher's way of setting them everywhere; options are named as such.
  const bool variable = std::string_view(name).rfind("DTRAIN_", 0) == 0;
  DTRAIN_USAGE_FAIL() << name << " differs between ranks: " << values.str() << ". Every rank must use the same value"
                      << (variable ? std::string(" (set it for all ranks, e.g. mpirun -x ") + name + ")"
                                   : std::string(" (pass the same option to every rank)"));
}

}  // namespace dtrain::comm
