#include "runtime/train/data/image_resize.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "runtime/core/error.h"

// Run-time dispatch between an AVX2/FMA build of the inner loops and the baseline (the binaries run
// on hosts we do not compile on, so -march=native is not an option).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DTRAIN_SIMD_CLONES __attribute__((target_clones("arch=haswell", "default")))
#else
#define DTRAIN_SIMD_CLONES
#endif

namespace dtrain::train {
namespace {

// Appends output i's raw taps (first contributing source pixel, normalized weights) to `w`.
int axis_taps(double start, double scale, double support, int source_size, int i, std::vector<double>& w) {
  const double center = start + (i + 0.5) * scale;  // in source coordinates, pixel centres at k + 0.5
  const int lo = std::max(static_cast<int>(std::floor(center - support)), 0);
  const int hi = std::min(static_cast<int>(std::ceil(center + support)), source_size);
  w.clear();
  double total = 0;
  for (int k = lo; k < hi; ++k) {
    const double d = std::fabs((k + 0.5 - center) / support);
    w.push_back(d < 1 ? 1 - d : 0);
    total += w.back();
  }
  if (total <= 0) {  // degenerate (a region thinner than a pixel at the border): nearest pixel
    w.assign(1, 1.0);
    return std::clamp(static_cast<int>(center), 0, source_size - 1);
  }
  // Trim zero-weight taps at both ends, so the inner loops touch only contributing pixels.
  size_t a = 0, b = w.size();
  while (a < b && w[a] == 0) ++a;
  while (b > a && w[b - 1] == 0) --b;
  w.erase(w.begin() + static_cast<long>(b), w.end());
  w.erase(w.begin(), w.begin() + static_cast<long>(a));
  for (double& v : w) v /= total;
  return lo + static_cast<int>(a);
}

// The few geometries a thread met last: validation resizes many images of the same size alike.
struct TapCache {
  struct Entry {
    double start = -1, length = -1;
    int source = -1, out = -1;
    ResampleTaps taps;
  };
  std::array<Entry, 8> entries;
  size_t next = 0;

  const ResampleTaps& get(double start, double length, int source, int out) {
    for (const Entry& e : entries) {
      if (e.start == start && e.length == length && e.source == source && e.out == out) return e.taps;
    }
    Entry& e = entries[next++ % entries.size()];
    e.start = start, e.length = length, e.source = source, e.out = out;
    e.taps = resample_taps(start, length, source, out);
    return e.taps;
  }
};

struct ResizeScratch {
  TapCache across, down;
  std::vector<float> rows, acc;
};

// Fixed channel and tap counts, so the compiler unrolls the taps and keeps the sums in registers.
template <int kChannels, int kTaps>
DTRAIN_SIMD_CLONES void horizontal_row(const uint8_t* __restrict src, const int* __restrict first,
                                       const float* __restrict weights, int out_width, bool flip,
                                       float* __restrict dst) {
  for (int x = 0; x < out_width; ++x) {
    const float* w = weights + static_cast<size_t>(x) * kTaps;
    const uint8_t* p = src + static_cast<long>(first[x]) * kChannels;
    float sum[kChannels] = {};
    for (int k = 0; k < kTaps; ++k) {
      for (int ch = 0; ch < kChannels; ++ch) sum[ch] += w[k] * p[k * kChannels + ch];
    }
    float* o = dst + static_cast<size_t>(flip ? out_width - 1 - x : x) * kChannels;
    for (int ch = 0; ch < kChannels; ++ch) o[ch] = sum[ch];
  }
}

// The specialization for the axis's tap count, or nullptr.
template <int kChannels>
auto horizontal_kernel(int taps) -> void (*)(const uint8_t*, const int*, const float*, int, bool, float*) {
  switch (taps) {
    case 1: return horizontal_row<kChannels, 1>;
    case 2: return horizontal_row<kChannels, 2>;
    case 3: return horizontal_row<kChannels, 3>;
    case 4: return horizontal_row<kChannels, 4>;
    case 5: return horizontal_row<kChannels, 5>;
    case 6: return horizontal_row<kChannels, 6>;
    default: return nullptr;
  }
}

void horizontal_row_any(const uint8_t* src, const ResampleTaps& t, int out_width, int channels, bool flip, float* dst) {
  for (int x = 0; x < out_width; ++x) {
    const float* w = t.weights.data() + static_cast<size_t>(x) * t.taps;
    const uint8_t* p = src + static_cast<long>(t.first[static_cast<size_t>(x)]) * channels;
    float* o = dst + static_cast<size_t>(flip ? out_width - 1 - x : x) * channels;
    for (int ch = 0; ch < channels; ++ch) {
      float sum = 0;
      for (int k = 0; k < t.taps; ++k) sum += w[k] * p[k * channels + ch];
      o[ch] = sum;
    }
  }
}

// Rounded half up and clamped to 8 bits (the sums are never negative and at most 255 but for float
// slack). Clamping the integer keeps the loop vectorizable.
inline uint8_t to_byte(float v) {
  const int rounded = static_cast<int>(v + 0.5f);
  return static_cast<uint8_t>(rounded < 0 ? 0 : rounded > 255 ? 255 : rounded);
}

// One output row: the weighted sum of kTaps filtered rows.
template <int kTaps>
DTRAIN_SIMD_CLONES void vertical_row(const float* __restrict rows, size_t row_floats, const float* __restrict w,
                                     uint8_t* __restrict out) {
  for (size_t i = 0; i < row_floats; ++i) {
    float sum = 0;
    for (int k = 0; k < kTaps; ++k) sum += w[k] * rows[static_cast<size_t>(k) * row_floats + i];
    out[i] = to_byte(sum);
  }
}

DTRAIN_SIMD_CLONES void vertical_row_any(const float* __restrict rows, size_t row_floats, const float* __restrict w,
                                         int taps, float* __restrict acc, uint8_t* __restrict out) {
  for (size_t i = 0; i < row_floats; ++i) acc[i] = w[0] * rows[i];
  for (int k = 1; k < taps; ++k) {
    const float wk = w[k];
    const float* row = rows + static_cast<size_t>(k) * row_floats;
    for (size_t i = 0; i < row_floats; ++i) acc[i] += wk * row[i];
  }
  for (size_t i = 0; i < row_floats; ++i) {
    out[i] = to_byte(acc[i]);
  }
}

auto vertical_kernel(int taps) -> void (*)(const float*, size_t, const float*, uint8_t*) {
  switch (taps) {
    case 1: return vertical_row<1>;
    case 2: return vertical_row<2>;
    case 3: return vertical_row<3>;
    case 4: return vertical_row<4>;
    case 5: return vertical_row<5>;
    case 6: return vertical_row<6>;
    default: return nullptr;
  }
}

}  // namespace

ResampleTaps resample_taps(double start, double length, int source_size, int out_size) {
  const double scale = length / out_size;       // source pixels per output pixel
  const double support = std::max(1.0, scale);  // triangle half-width in source pixels
  std::vector<int> first(static_cast<size_t>(out_size));
  std::vector<std::vector<double>> raw(static_cast<size_t>(out_size));
  int taps = 1;
  for (int i = 0; i < out_size; ++i) {
    first[static_cast<size_t>(i)] = axis_taps(start, scale, support, source_size, i, raw[static_cast<size_t>(i)]);
    taps = std::max(taps, static_cast<int>(raw[static_cast<size_t>(i)].size()));
  }
  ResampleTaps t;
  t.taps = std::min(taps, source_size);
  t.first.resize(static_cast<size_t>(out_size));
  t.weights.assign(static_cast<size_t>(out_size) * t.taps, 0.0f);
  for (size_t i = 0; i < first.size(); ++i) {
    // Every row reads `taps` pixels; near the right edge the window starts earlier instead of
    // running past the source, and the row's weights sit further in.
    const int begin = std::min(first[i], source_size - t.taps);
    t.first[i] = begin;
    for (size_t k = 0; k < raw[i].size(); ++k) {
      t.weights[i * t.taps + static_cast<size_t>(first[i] - begin) + k] = static_cast<float>(raw[i][k]);
    }
  }
  return t;
}

void resize_region(const ImageView& source, const CropRegion& region, int out_width, int out_height, bool flip,
                   uint8_t* out) {
  DTRAIN_CHECK(region.width > 0 && region.height > 0 && region.x >= 0 && region.y >= 0 &&
               region.x + region.width <= source.width + 1e-6 && region.y + region.height <= source.height + 1e-6)
      << "crop region " << region.x << "," << region.y << " " << region.width << "x" << region.height << " outside the "
      << source.width << "x" << source.height << " image";
  thread_local ResizeScratch scratch;
  const int c = source.channels;
  const ResampleTaps& across = scratch.across.get(region.x, region.width, source.width, out_width);
  const ResampleTaps& down = scratch.down.get(region.y, region.height, source.height, out_height);
  // Only the source rows some output row reads are filtered horizontally, once each.
  const int row_lo = down.first.front();
  const int row_hi = down.first.back() + down.taps;
  const size_t row_floats = static_cast<size_t>(out_width) * c;
  scratch.rows.resize(static_cast<size_t>(row_hi - row_lo) * row_floats);
  scratch.acc.resize(row_floats);
  const auto fast = c == 3 ? horizontal_kernel<3>(across.taps) : c == 1 ? horizontal_kernel<1>(across.taps) : nullptr;
  for (int y = row_lo; y < row_hi; ++y) {
    const uint8_t* src = source.pixels + static_cast<long>(y) * source.stride;
    float* dst = scratch.rows.data() + static_cast<size_t>(y - row_lo) * row_floats;
    if (fast != nullptr) {
      fast(src, across.first.data(), across.weights.data(), out_width, flip, dst);
    } else {
      horizontal_row_any(src, across, out_width, c, flip, dst);
    }
  }
  const auto fast_down = vertical_kernel(down.taps);
  for (int y = 0; y < out_height; ++y) {
    const float* rows =
        scratch.rows.data() + static_cast<size_t>(down.first[static_cast<size_t>(y)] - row_lo) * row_floats;
    const float* w = down.weights.data() + static_cast<size_t>(y) * down.taps;
    uint8_t* o = out + static_cast<size_t>(y) * row_floats;
    if (fast_down != nullptr) {
      fast_down(rows, row_floats, w, o);
    } else {
      vertical_row_any(rows, row_floats, w, down.taps, scratch.acc.data(), o);
    }
  }
}

}  // namespace dtrain::train
