#pragma once
// The one clock of step times, communication spans and the timeline: seconds on the monotonic
// clock. The timeline lines up comm::Work spans, GPU events turned into host time and the step
// loop's spans, so they must all read this same clock.
#include <chrono>

namespace dtrain::runtime {

inline double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace dtrain::runtime
