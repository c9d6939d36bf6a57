#include "train/data/image_resize.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "runtime/base/error.h"

// Run-time dispatch between an AVX2 build of the inner loops and the baseline (the binaries run on
// hosts we do not compile on, so -march=native is not an option). The clone is picked by CPU
// feature, not by CPU model: "arch=haswell" was tested with __builtin_cpu_is, so no AMD EPYC or
// virtualised Xeon ever took it and every host ran the SSE2 baseline. AVX2 without FMA: the clones
// then round alike (no contraction), so a batch does not depend on the host's CPU.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DTRAIN_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DTRAIN_SIMD_CLONES
#endif

namespace dtrain::train {
namespace {

// Output i's taps, trimmed to the contributing source pixels: writes their normalized weights to
// `w` (room for at least 2 * ceil(support) + 2) and their count to `count`; returns the first pixel.
int axis_taps(double start, double scale, double support, int source_size, int i, double* w, int* count) {
  const double center = start + (i + 0.5) * scale;  // in source coordinates, pixel centres at k + 0.5
  const int lo = std::max(static_cast<int>(std::floor(center - support)), 0);
  const int hi = std::min(static_cast<int>(std::ceil(center + support)), source_size);
  double total = 0;
  int n = 0, skipped = 0;
  for (int k = lo; k < hi; ++k) {
    const double d = std::fabs((k + 0.5 - center) / support);
    const double weight = d < 1 ? 1 - d : 0;
    if (n == 0 && weight == 0) {  // leading zero-weight taps: the inner loops skip them
      ++skipped;
      continue;
    }
    w[n++] = weight;
    total += weight;
  }
  while (n > 0 && w[n - 1] == 0) --n;  // and trailing ones
  if (total <= 0) {                    // degenerate (a region thinner than a pixel at the border): nearest pixel
    w[0] = 1.0;
    *count = 1;
    return std::clamp(static_cast<int>(center), 0, source_size - 1);
  }
  for (int k = 0; k < n; ++k) w[k] /= total;
  *count = n;
  return lo + skipped;
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
    fill_resample_taps(start, length, source, out, &e.taps);
    return e.taps;
  }
};

struct ResizeScratch {
  TapCache across, down;
  std::vector<float> rows, acc;
};

// Fixed channel and tap counts, so the compiler unrolls the taps and keeps the sums in registers.
// An RGBX pixel (kPixelBytes 4) is one 32-bit load widened to a vector of four floats: the four
// channels' sums advance in one multiply and one add per tap (the scalar form, which the compiler
// did not vectorise, was 8% of a loader thread's time). Each channel's sum is formed in the same
// order either way, so both forms give the same bits.
template <int kChannels, int kPixelBytes, int kTaps>
DTRAIN_SIMD_CLONES void horizontal_row(const uint8_t* __restrict src, const int* __restrict first,
                                       const float* __restrict weights, int out_width, bool flip,
                                       float* __restrict dst) {
  for (int x = 0; x < out_width; ++x) {
    const float* w = weights + static_cast<size_t>(x) * kTaps;
    const uint8_t* p = src + static_cast<long>(first[x]) * kPixelBytes;
    float* o = dst + static_cast<size_t>(flip ? out_width - 1 - x : x) * kChannels;
    if constexpr (kPixelBytes == 4) {
      using Ints4 = int32_t __attribute__((vector_size(16)));
      using Floats4 = float __attribute__((vector_size(16)));
      const Ints4 byte_shifts = {0, 8, 16, 24};  // little-endian: R, G, B, X
      Floats4 sum = {0, 0, 0, 0};
      for (int k = 0; k < kTaps; ++k) {
        int32_t word;
        std::memcpy(&word, p + k * 4, 4);
        // The word broadcast, shifted and masked: vpbroadcastd, vpsrlvd, vpand, vcvtdq2ps under AVX2
        // (GCC turned a byte-vector conversion into scalar extracts).
        const Ints4 channels = (Ints4{word, word, word, word} >> byte_shifts) & 255;
        sum += w[k] * __builtin_convertvector(channels, Floats4);
      }
      for (int ch = 0; ch < kChannels; ++ch) o[ch] = sum[ch];
    } else {
      float sum[kChannels] = {};
      for (int k = 0; k < kTaps; ++k) {
        for (int ch = 0; ch < kChannels; ++ch) sum[ch] += w[k] * p[k * kChannels + ch];
      }
      for (int ch = 0; ch < kChannels; ++ch) o[ch] = sum[ch];
    }
  }
}

using HorizontalKernel = void (*)(const uint8_t*, const int*, const float*, int, bool, float*);

// The specialization for the axis's tap count, or nullptr.
template <int kChannels, int kPixelBytes>
HorizontalKernel horizontal_kernel(int taps) {
  switch (taps) {
    case 1: return horizontal_row<kChannels, kPixelBytes, 1>;
    case 2: return horizontal_row<kChannels, kPixelBytes, 2>;
    case 3: return horizontal_row<kChannels, kPixelBytes, 3>;
    case 4: return horizontal_row<kChannels, kPixelBytes, 4>;
    case 5: return horizontal_row<kChannels, kPixelBytes, 5>;
    case 6: return horizontal_row<kChannels, kPixelBytes, 6>;
    default: return nullptr;
  }
}

HorizontalKernel horizontal_kernel(int channels, int pixel_bytes, int taps) {
  if (channels == 3 && pixel_bytes == 4) return horizontal_kernel<3, 4>(taps);
  if (channels == 3 && pixel_bytes == 3) return horizontal_kernel<3, 3>(taps);
  if (channels == 1 && pixel_bytes == 1) return horizontal_kernel<1, 1>(taps);
  return nullptr;
}

void horizontal_row_any(const uint8_t* src, const ResampleTaps& t, int out_width, int channels, int pixel_bytes,
                        bool flip, float* dst) {
  for (int x = 0; x < out_width; ++x) {
    const float* w = t.weights.data() + static_cast<size_t>(x) * t.taps;
    const uint8_t* p = src + static_cast<long>(t.first[static_cast<size_t>(x)]) * pixel_bytes;
    float* o = dst + static_cast<size_t>(flip ? out_width - 1 - x : x) * channels;
    for (int ch = 0; ch < channels; ++ch) {
      float sum = 0;
      for (int k = 0; k < t.taps; ++k) sum += w[k] * p[k * pixel_bytes + ch];
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

int resample_tap_bound(double length, int out_size) {
  return 2 * static_cast<int>(std::ceil(std::max(1.0, length / out_size))) + 2;
}

void fill_resample_taps(double start, double length, int source_size, int out_size, ResampleTaps* t) {
  const double scale = length / out_size;       // source pixels per output pixel
  const double support = std::max(1.0, scale);  // triangle half-width in source pixels
  // Raw taps per output at a fixed stride, in per-thread buffers: no allocation once warm (this
  // runs twice per training image, whose crops all differ).
  const size_t stride = static_cast<size_t>(resample_tap_bound(length, out_size));
  thread_local std::vector<double> raw;
  thread_local std::vector<int> raw_first, raw_count;
  raw.resize(static_cast<size_t>(out_size) * stride);
  raw_first.resize(static_cast<size_t>(out_size));
  raw_count.resize(static_cast<size_t>(out_size));
  int taps = 1;
  for (int i = 0; i < out_size; ++i) {
    const size_t o = static_cast<size_t>(i);
    raw_first[o] = axis_taps(start, scale, support, source_size, i, raw.data() + o * stride, &raw_count[o]);
    taps = std::max(taps, raw_count[o]);
  }
  t->taps = std::min(taps, source_size);
  t->first.resize(static_cast<size_t>(out_size));
  t->weights.assign(static_cast<size_t>(out_size) * t->taps, 0.0f);
  for (size_t i = 0; i < t->first.size(); ++i) {
    // Every row reads `taps` pixels; near the right edge the window starts earlier instead of
    // running past the source, and the row's weights sit further in.
    const int begin = std::min(raw_first[i], source_size - t->taps);
    t->first[i] = begin;
    float* weights = t->weights.data() + i * t->taps + (raw_first[i] - begin);
    for (int k = 0; k < raw_count[i]; ++k) weights[k] = static_cast<float>(raw[i * stride + k]);
  }
}

void resize_region(const ImageView& source, const CropRegion& region, int out_width, int out_height, bool flip,
                   uint8_t* out) {
  DTRAIN_CHECK(region.width > 0 && region.height > 0 && region.x >= 0 && region.y >= 0 &&
               region.x + region.width <= source.width + 1e-6 && region.y + region.height <= source.height + 1e-6)
      << "crop region " << region.x << "," << region.y << " " << region.width << "x" << region.height << " outside the "
      << source.width << "x" << source.height << " image";
  const int c = source.channels;
  const int pixel_bytes = source.pixel_bytes == 0 ? c : source.pixel_bytes;
  DTRAIN_CHECK(c > 0 && pixel_bytes >= c) << "image of " << c << " channels in " << pixel_bytes << " bytes per pixel";
  thread_local ResizeScratch scratch;
  const ResampleTaps& across = scratch.across.get(region.x, region.width, source.width, out_width);
  const ResampleTaps& down = scratch.down.get(region.y, region.height, source.height, out_height);
  // Only the source rows some output row reads are filtered horizontally, once each.
  const int row_lo = down.first.front();
  const int row_hi = down.first.back() + down.taps;
  const size_t row_floats = static_cast<size_t>(out_width) * c;
  scratch.rows.resize(static_cast<size_t>(row_hi - row_lo) * row_floats);
  scratch.acc.resize(row_floats);
  const HorizontalKernel fast = horizontal_kernel(c, pixel_bytes, across.taps);
  for (int y = row_lo; y < row_hi; ++y) {
    const uint8_t* src = source.pixels + static_cast<long>(y) * source.stride;
    float* dst = scratch.rows.data() + static_cast<size_t>(y - row_lo) * row_floats;
    if (fast != nullptr) {
      fast(src, across.first.data(), across.weights.data(), out_width, flip, dst);
    } else {
      horizontal_row_any(src, across, out_width, c, pixel_bytes, flip, dst);
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
