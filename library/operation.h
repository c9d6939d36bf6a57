#pragma once
// One rank's named operation in flight: the request, the caller's buffers, and its completion,
// which the C ABI's handle refers to. A device operation also carries its events (device.h): the
// one recorded on the caller's stream at submission, and the one the library's stream records
// once the collective is queued there.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "library/request.h"

namespace dtrain::library {

class StreamEvent;

// Set once by the background thread, read by any thread. Thread-safe.
class Completion {
 public:
  // `on_stream`: a device operation's completion event (it was queued on the library's stream and
  // is done when the event is); nullptr for a host operation, which is done now.
  void finish(int status, std::string error, std::shared_ptr<StreamEvent> on_stream = nullptr);
  // Until finish(): a device operation is then queued, not necessarily done (on_stream()).
  void wait();
  bool wait_for(double seconds);  // true once done, false when the time ran out first
  bool done();
  int status();                              // after done()
  const std::string& error();                // after done(); stable from then on
  std::shared_ptr<StreamEvent> on_stream();  // after done()

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  int status_ = 0;
  std::string error_;
  std::shared_ptr<StreamEvent> on_stream_;
};

struct Operation {
  Request request;
  const void* send = nullptr;
  void* recv = nullptr;            // broadcast: the one buffer
  int64_t* recv_counts = nullptr;  // all-gather, optional
  std::shared_ptr<Completion> completion;
  std::shared_ptr<StreamEvent> ready;  // device: recorded on the caller's stream at submission
  std::shared_ptr<StreamEvent> done;   // device: set by the executor once the work is queued
};

}  // namespace dtrain::library
