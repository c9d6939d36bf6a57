#include "library/operation.h"

namespace dtrain::library {

void Completion::finish(int status, std::string error, std::shared_ptr<StreamEvent> on_stream) {
  {
    std::lock_guard lock(mutex_);
    status_ = status;
    error_ = std::move(error);
    on_stream_ = std::move(on_stream);
    done_ = true;
  }
  cv_.notify_all();
}

void Completion::wait() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [this] { return done_; });
}

bool Completion::wait_for(double seconds) {
  std::unique_lock lock(mutex_);
  return cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; });
}

bool Completion::done() {
  std::lock_guard lock(mutex_);
  return done_;
}

int Completion::status() {
  std::lock_guard lock(mutex_);
  return status_;
}

std::shared_ptr<StreamEvent> Completion::on_stream() {
  std::lock_guard lock(mutex_);
  return on_stream_;
}

const std::string& Completion::error() {
  std::lock_guard lock(mutex_);
  return error_;
}

}  // namespace dtrain::library
