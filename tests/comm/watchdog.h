#pragma once
// A time limit inside a test: a collective that hangs must fail the test with a line saying what
// hung, not run into the CI job's limit. If the scope lasts longer than `seconds`, the process
// prints the line and exits with 124 (mpirun then ends the other ranks).
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "tests/support/mpi_world.h"

namespace dtrain::test {

class Watchdog {
 public:
  Watchdog(std::string what, int seconds) : what_(std::move(what)) {
    const int rank = world_rank();
    thread_ = std::thread([this, seconds, rank] {
      std::unique_lock lock(mutex_);
      if (done_cv_.wait_for(lock, std::chrono::seconds(seconds), [&] { return done_; })) return;
      std::fprintf(stderr, "[rank %d] WATCHDOG: %s did not finish in %d s (hung)\n", rank, what_.c_str(), seconds);
      std::fflush(stderr);
      std::fflush(stdout);
      std::_Exit(124);
    });
  }
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::string what_;
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace dtrain::test
