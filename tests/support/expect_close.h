#pragma once
// GPU kernel tests against float64 references: every element's error relative to |want| plus the
// RMS of want (so elements near zero are judged against the tensor's scale) must be within
// `tolerance`; prints the worst error beside the bound, so logs show the margin.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace dtrain::test {

inline void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tolerance,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double rms = 0;
  for (double w : want) rms += w * w;
  rms = std::sqrt(rms / std::max<size_t>(want.size(), 1));
  size_t wrong = 0, first = 0;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double error = std::fabs(got[i] - want[i]) / (std::fabs(want[i]) + rms + 1e-30);
    worst = std::max(worst, error);
    if (!(error <= tolerance) && wrong++ == 0) first = i;
  }
  EXPECT_EQ(wrong, 0u) << what << ": " << wrong << " of " << want.size() << " off; first " << first << ": got "
                       << got[first] << ", want " << want[first];
  std::printf("  %-60s worst %.2e (bound %.0e)\n", what.c_str(), worst, tolerance);
}

}  // namespace dtrain::test
