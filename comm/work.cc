#include "comm/work.h"

namespace dtrain::comm {

Work Work::pending() {
  Work work;
  work.state_ = std::make_shared<State>();
  return work;
}

void Work::wait() const {
  if (!state_) return;
  std::unique_lock lock(state_->mutex);
  state_->done_cv.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

bool Work::test() const {
  if (!state_) return true;
  std::lock_guard lock(state_->mutex);
  if (state_->done && state_->error) std::rethrow_exception(state_->error);
  return state_->done;
}

void Work::complete() const {
  std::lock_guard lock(state_->mutex);
  state_->done = true;
  state_->done_cv.notify_all();
}

void Work::fail(std::exception_ptr error) const {
  std::lock_guard lock(state_->mutex);
  state_->error = std::move(error);
  state_->done = true;
  state_->done_cv.notify_all();
}

}  // namespace dtrain::comm
