#include "models/cuda/op_timer.h"

namespace dtrain::models::cuda {

const char* OpTimer::name(Kind kind) {
  switch (kind) {
    case kConvForward: return "conv forward";
    case kConvDataGrad: return "conv input gradient";
    case kConvWeightGrad: return "conv weight gradient";
    case kNormActForward: return "batch norm + act forward";
    case kNormActBackward: return "batch norm + act backward";
    case kPoolForward: return "pooling forward";
    case kPoolBackward: return "pooling backward";
    case kLinearForward: return "linear forward";
    case kLinearBackward: return "linear backward";
    case kKinds: break;
  }
  return "?";
}

OpTimer::Scope::Scope(OpTimer* timer, Kind kind) : timer_(timer), kind_(kind) {
  if (timer_) begin_ = timer_->mark();
}

OpTimer::Scope::~Scope() {
  if (timer_) timer_->intervals_.push_back({kind_, begin_, timer_->mark()});
}

size_t OpTimer::mark() {
  if (used_ == events_.size()) events_.emplace_back(true);
  events_[used_].record(stream_);
  return used_++;
}

void OpTimer::collect() {
  if (used_ > 0) events_[used_ - 1].synchronize();
  for (const Interval& i : intervals_) total_ms_[i.kind] += events_[i.end].elapsed_ms_since(events_[i.begin]);
  intervals_.clear();
  used_ = 0;
}

}  // namespace dtrain::models::cuda
