#pragma once
// One cycle's traffic on the control communicator: every rank's request bytes to rank 0, and rank
// 0's answer to every rank. Each direction is one fixed-size collective when its bytes fit a slot
// (kSlotBytes: a few names, the common case of a cycle), so a cycle costs two collectives instead
// of a size exchange plus a payload exchange each way: every collective is a point where all ranks
// must be running, which is what a small operation's latency is made of. What does not fit
// follows: rank 0's broadcast then asks for the requests that did not fit (a gather of those
// alone) before it answers, and an answer longer than a slot follows whole.
//
// Collective over `comm`: every rank calls exchange() once per cycle, on one thread.
#include <mpi.h>

#include <functional>
#include <string_view>
#include <vector>

namespace dtrain::library {

class ControlExchange {
 public:
  static constexpr int kSlotBytes = 256;

  ControlExchange(MPI_Comm comm, int rank, int size);

  // Rank 0 answers: it gets every rank's request bytes (by rank) and returns the answer's bytes.
  using Answer = std::function<std::vector<char>(const std::vector<std::string_view>& requests)>;
  // `requests`: this rank's bytes; `answer` is called on rank 0 only. Returns rank 0's answer.
  std::vector<char> exchange(const std::vector<char>& requests, const Answer& answer);

 private:
  std::vector<std::string_view> inline_requests(std::vector<int>* lengths, bool* overflow) const;
  std::vector<std::string_view> gather_overflow(const std::vector<char>& requests, const std::vector<int>& lengths);

  MPI_Comm comm_;
  int rank_;
  int size_;
  std::vector<char> slot_;      // this rank's slot: int32 length, then the bytes when they fit
  std::vector<char> slots_;     // rank 0: every rank's slot
  std::vector<char> overflow_;  // rank 0: the requests that did not fit their slots, by rank
};

}  // namespace dtrain::library
