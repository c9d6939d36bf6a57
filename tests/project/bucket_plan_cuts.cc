// The C++ bucket plan's cuts for bucket_plan_test.py, which checks bench/project/bucket_plan.py
// against them. Reads cases from stdin, one a line:
//   COUNT BODY_BYTES TAIL_BYTES FIRST_BYTES N BEGIN_1 END_1 ... BEGIN_N END_N
// and writes each case's cuts on one line (nothing for an empty plan).
#include <cstddef>
#include <iostream>
#include <vector>

#include "comm/gradient_sync/bucket_plan.h"

int main() {
  size_t count = 0, n = 0;
  dtrain::comm::BucketSizes sizes;
  while (std::cin >> count >> sizes.body_bytes >> sizes.tail_bytes >> sizes.first_bytes >> n) {
    std::vector<dtrain::comm::GradientRange> ranges(n);
    for (dtrain::comm::GradientRange& r : ranges) std::cin >> r.begin >> r.end;
    const dtrain::comm::BucketPlan plan = dtrain::comm::plan_buckets(count, sizes, ranges);
    const char* sep = "";
    for (size_t cut : plan.cuts) std::cout << sep << cut, sep = " ";
    std::cout << "\n";
  }
  return 0;
}
