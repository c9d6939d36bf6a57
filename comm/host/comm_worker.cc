#include "comm/host/comm_worker.h"

#include "runtime/base/error.h"

namespace dtrain::comm {

CommWorker::CommWorker() : thread_([this] { run(); }) {}

CommWorker::~CommWorker() {
  stop();
}

void CommWorker::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool CommWorker::idle() {
  std::lock_guard lock(mutex_);
  return queue_.empty() && !busy_;
}

void CommWorker::wait_idle() {
  std::unique_lock lock(mutex_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

Work CommWorker::submit(std::function<void()> operation) {
  Work work = Work::pending();
  {
    std::lock_guard lock(mutex_);
    DTRAIN_CHECK(!stopping_) << "operation submitted to a communicator that is shutting down";
    queue_.push_back(Task{std::move(operation), work});
  }
  queue_cv_.notify_one();
  return work;
}

Work CommWorker::run_inline_if_idle(std::function<void()> operation) {
  {
    std::lock_guard lock(mutex_);
    DTRAIN_CHECK(!stopping_) << "operation submitted to a communicator that is shutting down";
    if (busy_ || !queue_.empty()) {
      Work work = Work::pending();
      queue_.push_back(Task{std::move(operation), work});
      queue_cv_.notify_one();
      return work;
    }
    busy_ = true;
  }
  Work work = Work::pending();
  work.mark_started();
  try {
    operation();
    work.complete();
  } catch (...) {
    work.fail(std::current_exception());
  }
  bool queued = false;
  {
    std::lock_guard lock(mutex_);
    busy_ = false;
    queued = !queue_.empty();
    if (!queued) idle_cv_.notify_all();
  }
  // Wake the worker only if work was queued behind us: a needless wake-up costs a context switch
  // on a core another rank may be using.
  if (queued) queue_cv_.notify_one();
  return work;
}

void CommWorker::run() {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mutex_);
      queue_cv_.wait(lock, [&] { return (stopping_ && !busy_) || (!queue_.empty() && !busy_); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    task.work.mark_started();
    try {
      task.operation();
      task.work.complete();
    } catch (...) {
      task.work.fail(std::current_exception());
    }
    std::lock_guard lock(mutex_);
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

}  // namespace dtrain::comm
