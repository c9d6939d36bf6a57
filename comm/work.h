#pragma once
// Work: the handle a collective returns (as c10d's Work). wait() blocks until the operation is
// done and rethrows its failure; test() polls. A default-constructed Work is already complete.
// Copies share the same operation. Thread-safe.
#include <condition_variable>
#include <exception>
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

  // Done when every one of `works` is; wait() waits for all of them, then rethrows the first
  // failure (so no part is still running when it throws).
  static Work all_of(std::vector<Work> works);

  // The producer side: a pending Work and its completion.
  static Work pending();
  void complete() const;
  void fail(std::exception_ptr error) const;

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    std::exception_ptr error;
    std::vector<Work> parts;  // all_of
  };
  std::shared_ptr<State> state_;
};

}  // namespace dtrain::comm
