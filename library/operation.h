#pragma once
// One rank's named operation in flight: the request, the caller's buffers, and its completion,
// which the C ABI's handle refers to.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "library/request.h"

namespace dtrain::library {

// Set once by the background thread, read by any thread. Thread-safe.
class Completion {
 public:
  void finish(int status, std::string error);
  void wait();
  bool wait_for(double seconds);  // true once done, false when the time ran out first
  bool done();
  int status();                // after done()
  const std::string& error();  // after done(); stable from then on

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  int status_ = 0;
  std::string error_;
};

struct Operation {
  Request request;
  const void* send = nullptr;
  void* recv = nullptr;            // broadcast: the one buffer
  int64_t* recv_counts = nullptr;  // all-gather, optional
  std::shared_ptr<Completion> completion;
};

}  // namespace dtrain::library
