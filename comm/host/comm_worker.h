#pragma once
// One background thread per communicator that runs its host-side operations in submission order.
// Every rank submits the same collectives in the same order, so running them FIFO on one thread
// keeps the ranks matched, and all MPI traffic of the communicator stays on that thread.
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "comm/work.h"

namespace dtrain::comm {

class CommWorker {
 public:
  CommWorker();
  ~CommWorker();  // stop()
  // Runs every queued operation, then joins the thread. Idempotent; nothing may be submitted after.
  void stop();
  bool stopped() const { return !thread_.joinable(); }
  // Nothing queued or running.
  bool idle();
  // Blocks until every operation submitted so far has run (the worker is idle).
  void wait_idle();
  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  // Queues `operation`; the returned Work completes when it has run (or failed with its exception).
  Work submit(std::function<void()> operation);

  // Latency path for small operations: when nothing is queued or running, runs `operation` right
  // here on the calling thread (a thread hand-off costs several microseconds, more than a small
  // all-reduce itself) and returns a completed Work; otherwise queues it like submit().
  Work run_inline_if_idle(std::function<void()> operation);

 private:
  struct Task {
    std::function<void()> operation;
    Work work;
  };
  void run();

  std::mutex mutex_;
  std::condition_variable queue_cv_;
  std::condition_variable idle_cv_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  bool busy_ = false;  // an operation is running, on the worker or inline
  std::thread thread_;
};

}  // namespace dtrain::comm
