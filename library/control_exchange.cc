#include "library/control_exchange.h"

#include <cstdint>
#include <cstring>

#include "runtime/mpi/mpi_check.h"

namespace dtrain::library {
namespace {

constexpr int kHeader = static_cast<int>(sizeof(int32_t));
constexpr int kInline = ControlExchange::kSlotBytes - kHeader;
// Rank 0's first broadcast when some rank's requests did not fit: "send them whole, then I answer".
constexpr int32_t kSendOverflow = -1;

int32_t read_length(const std::vector<char>& slots, size_t at) {
  int32_t length = 0;
  std::memcpy(&length, slots.data() + at, sizeof(length));
  return length;
}

// A slot holding `length` and, when they fit, the bytes themselves.
void fill_slot(std::vector<char>* slot, int32_t length, const char* bytes) {
  std::memcpy(slot->data(), &length, sizeof(length));
  if (length > 0 && length <= kInline) std::memcpy(slot->data() + kHeader, bytes, static_cast<size_t>(length));
}

}  // namespace

ControlExchange::ControlExchange(MPI_Comm comm, int rank, int size)
    : comm_(comm), rank_(rank), size_(size), slot_(kSlotBytes) {
  if (rank_ == 0) slots_.resize(static_cast<size_t>(kSlotBytes) * static_cast<size_t>(size_));
}

std::vector<char> ControlExchange::exchange(const std::vector<char>& requests, const Answer& answer) {
  fill_slot(&slot_, static_cast<int32_t>(requests.size()), requests.data());
  DTRAIN_MPI_CHECK(MPI_Gather(slot_.data(), kSlotBytes, MPI_CHAR, slots_.data(), kSlotBytes, MPI_CHAR, 0, comm_));
  std::vector<char> reply;
  std::vector<int> lengths;
  if (rank_ == 0) {
    bool overflow = false;
    std::vector<std::string_view> by_rank = inline_requests(&lengths, &overflow);
    if (!overflow) reply = answer(by_rank);
    fill_slot(&slot_, overflow ? kSendOverflow : static_cast<int32_t>(reply.size()), reply.data());
  }
  DTRAIN_MPI_CHECK(MPI_Bcast(slot_.data(), kSlotBytes, MPI_CHAR, 0, comm_));
  int32_t length = read_length(slot_, 0);
  if (length == kSendOverflow) {
    std::vector<std::string_view> by_rank = gather_overflow(requests, lengths);
    if (rank_ == 0) {
      reply = answer(by_rank);
      fill_slot(&slot_, static_cast<int32_t>(reply.size()), reply.data());
    }
    DTRAIN_MPI_CHECK(MPI_Bcast(slot_.data(), kSlotBytes, MPI_CHAR, 0, comm_));
    length = read_length(slot_, 0);
  }
  if (length <= kInline) return std::vector<char>(slot_.begin() + kHeader, slot_.begin() + kHeader + length);
  // Longer than a slot: the answer follows whole.
  reply.resize(static_cast<size_t>(length));
  DTRAIN_MPI_CHECK(MPI_Bcast(reply.data(), length, MPI_CHAR, 0, comm_));
  return reply;
}

// Rank 0: each rank's bytes where they fit its slot (empty views for the others), their lengths,
// and whether any did not fit.
std::vector<std::string_view> ControlExchange::inline_requests(std::vector<int>* lengths, bool* overflow) const {
  std::vector<std::string_view> by_rank(static_cast<size_t>(size_));
  lengths->resize(static_cast<size_t>(size_));
  for (size_t r = 0; r < by_rank.size(); ++r) {
    const size_t at = r * kSlotBytes;
    const int32_t length = read_length(slots_, at);
    (*lengths)[r] = length;
    if (length > kInline) {
      *overflow = true;
    } else {
      by_rank[r] = std::string_view(slots_.data() + at + kHeader, static_cast<size_t>(length));
    }
  }
  return by_rank;
}

// The second round: the ranks whose requests did not fit send them whole; rank 0 gets every rank's
// bytes, from the slots or from this gather.
std::vector<std::string_view> ControlExchange::gather_overflow(const std::vector<char>& requests,
                                                               const std::vector<int>& lengths) {
  const int mine = requests.size() > static_cast<size_t>(kInline) ? static_cast<int>(requests.size()) : 0;
  std::vector<int> counts(lengths.size());
  std::vector<int> offsets(lengths.size());
  int total = 0;
  for (size_t r = 0; r < lengths.size(); ++r) {
    counts[r] = lengths[r] > kInline ? lengths[r] : 0;
    offsets[r] = total;
    total += counts[r];
  }
  overflow_.resize(static_cast<size_t>(total));
  DTRAIN_MPI_CHECK(MPI_Gatherv(requests.data(), mine, MPI_CHAR, overflow_.data(), counts.data(), offsets.data(),
                               MPI_CHAR, 0, comm_));
  std::vector<std::string_view> by_rank(lengths.size());
  for (size_t r = 0; r < lengths.size(); ++r) {
    by_rank[r] = counts[r] > 0
                     ? std::string_view(overflow_.data() + offsets[r], static_cast<size_t>(counts[r]))
                     : std::string_view(slots_.data() + r * kSlotBytes + kHeader, static_cast<size_t>(lengths[r]));
  }
  return by_rank;
}

}  // namespace dtrain::library
