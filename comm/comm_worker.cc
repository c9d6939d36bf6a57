#include "comm/comm_worker.h"

namespace dtrain::comm {

CommWorker::CommWorker() : thread_([this] { run(); }) {}

CommWorker::~CommWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  thread_.join();
}

Work CommWorker::submit(std::function<void()> operation) {
  Work work = Work::pending();
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(Task{std::move(operation), work});
  }
  queue_cv_.notify_one();
  return work;
}

void CommWorker::run() {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mutex_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      task.operation();
      task.work.complete();
    } catch (...) {
      task.work.fail(std::current_exception());
    }
  }
}

}  // namespace dtrain::comm
