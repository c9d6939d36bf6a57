#pragma once
// Per-channel moments for batch norm: Welford's update for one value, Chan's merge of two sets.
// The count is an integer: a float count stops growing at 2^24 rows and merges inexactly past it.
// Host and device (the host side is what the unit test exercises without a GPU).
#include <cstdint>

#if defined(__CUDACC__)
#define DTRAIN_MOMENTS_FN __host__ __device__ inline
#else
#define DTRAIN_MOMENTS_FN inline
#endif

namespace dtrain::models::cuda {

struct Moments {
  int64_t n;   // values seen
  float mean;  // their mean
  float m2;    // the sum of their squared deviations from the mean
};

DTRAIN_MOMENTS_FN void add_value(Moments& m, float v) {
  m.n += 1;
  const float delta = v - m.mean;
  m.mean += delta / static_cast<float>(m.n);
  m.m2 += delta * (v - m.mean);
}

DTRAIN_MOMENTS_FN Moments merge(Moments a, Moments b) {
  const int64_t n = a.n + b.n;
  if (b.n == 0) return a;
  if (a.n == 0) return b;
  const float delta = b.mean - a.mean;
  const float wb = static_cast<float>(b.n) / static_cast<float>(n);  // the weights need no more than float
  return {n, a.mean + delta * wb, a.m2 + b.m2 + delta * delta * static_cast<float>(a.n) * wb};
}

}  // namespace dtrain::models::cuda

#undef DTRAIN_MOMENTS_FN
