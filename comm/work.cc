#include "comm/work.h"

namespace dtrain::comm {

Work Work::pending() {
  Work work;
  work.state_ = std::make_shared<State>();
  return work;
}

Work Work::all_of(std::vector<Work> works) {
  Work work;
  work.state_ = std::make_shared<State>();
  work.state_->done = true;
  work.state_->parts = std::move(works);
  return work;
}

void Work::wait() const {
  if (!state_) return;
  std::exception_ptr first;
  for (const Work& part : state_->parts) {
    try {
      part.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
  std::unique_lock lock(state_->mutex);
  state_->done_cv.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

bool Work::test() const {
  if (!state_) return true;
  bool parts_done = true;
  for (const Work& part : state_->parts) parts_done = part.test() && parts_done;
  if (!parts_done) return false;
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
