#include "comm/work.h"

#include <algorithm>
#include <cmath>

#include "runtime/base/steady_seconds.h"

namespace dtrain::comm {

using runtime::steady_seconds;

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

Work::Span Work::span() const {
  Span span{kUnknown, kUnknown};
  if (!state_) return span;
  if (!state_->parts.empty()) {
    for (const Work& part : state_->parts) {
      const Span s = part.span();
      if (std::isnan(s.begin) || std::isnan(s.end)) return Span{kUnknown, kUnknown};
      span.begin = std::isnan(span.begin) ? s.begin : std::min(span.begin, s.begin);
      span.end = std::isnan(span.end) ? s.end : std::max(span.end, s.end);
    }
    return span;
  }
  std::lock_guard lock(state_->mutex);
  if (!state_->done) return span;
  return Span{state_->started, state_->finished};
}

void Work::mark_started() const {
  const double now = steady_seconds();
  std::lock_guard lock(state_->mutex);
  state_->started = now;
}

void Work::complete() const {
  const double now = steady_seconds();
  std::lock_guard lock(state_->mutex);
  state_->finished = now;
  state_->done = true;
  state_->done_cv.notify_all();
}

void Work::fail(std::exception_ptr error) const {
  const double now = steady_seconds();
  std::lock_guard lock(state_->mutex);
  state_->finished = now;
  state_->error = std::move(error);
  state_->done = true;
  state_->done_cv.notify_all();
}

}  // namespace dtrain::comm
