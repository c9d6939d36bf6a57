#include "train/observe/progress.h"

#include <cmath>
#include <cstdio>

namespace dtrain::train {

std::string format_duration(double seconds) {
  const long total = std::isfinite(seconds) && seconds > 0 ? std::lround(seconds) : 0;
  const long h = total / 3600, m = total / 60 % 60, s = total % 60;
  char text[48];
  if (h > 0) {
    std::snprintf(text, sizeof text, "%ldh%02ldm%02lds", h, m, s);
  } else if (m > 0) {
    std::snprintf(text, sizeof text, "%ldm%02lds", m, s);
  } else {
    std::snprintf(text, sizeof text, "%.1fs", std::isfinite(seconds) && seconds > 0 ? seconds : 0.0);
  }
  return text;
}

std::string format_gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

double eta_seconds(double elapsed, long done, long steps_left) {
  if (done <= 0 || steps_left <= 0) return 0;
  return elapsed / static_cast<double>(done) * static_cast<double>(steps_left);
}

}  // namespace dtrain::train
