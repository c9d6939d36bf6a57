#pragma once
// Work: the handle a collective returns (as c10d's Work). wait() blocks until the operation is
// done and rethrows its failure; test() polls. A default-constructed Work is already complete.
// Copies share the same operation. Thread-safe.
//
// A Work run on the host also knows when it really ran: the comm worker (or the caller, for an
// inline operation) marks its start, and completion its end, on std::chrono::steady_clock (the
// clock of dtrain-train's step timer), for the timeline of dtrain-train (--timeline). Two clock
// reads per operation.
#include <condition_variable>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

namespace dtrain::comm {

class Work {
 public:
  Work() = default;

  void wait() const;
  // True once done; rethrows the failure if it failed.
  bool test() const;

  // When the operation ran, in seconds on std::chrono::steady_clock (its epoch); NaN where not
  // known (a default Work, a device operation that only queued work on a stream, one still
  // running). For all_of: the earliest start and the latest end of its parts.
  struct Span {
    double begin;
    double end;
  };
  Span span() const;

  // Done when every one of `works` is; wait() waits for all of them, then rethrows the first
  // failure (so no part is still running when it throws).
  static Work all_of(std::vector<Work> works);

  // The producer side: a pending Work and its completion.
  static Work pending();
  void mark_started() const;  // the operation begins to run now
  void complete() const;
  void fail(std::exception_ptr error) const;

 private:
  static constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();
  struct State {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    std::exception_ptr error;
    double started = kUnknown;
    double finished = kUnknown;
    std::vector<Work> parts;  // all_of
  };
  std::shared_ptr<State> state_;
};

}  // namespace dtrain::comm
