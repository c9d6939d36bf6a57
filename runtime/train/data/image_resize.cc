#include "runtime/train/data/image_resize.h"

#include <algorithm>
#include <cmath>

#include "runtime/core/error.h"

namespace dtrain::train {

ResampleTaps resample_taps(double start, double length, int source_size, int out_size) {
  ResampleTaps taps;
  taps.first.resize(static_cast<size_t>(out_size));
  taps.weights.resize(static_cast<size_t>(out_size));
  const double scale = length / out_size;            // source pixels per output pixel
  const double support = std::max(1.0, scale);       // triangle half-width in source pixels
  for (int i = 0; i < out_size; ++i) {
    const double center = start + (i + 0.5) * scale;  // in source coordinates, pixel centres at k + 0.5
    int lo = static_cast<int>(std::floor(center - support));
    int hi = static_cast<int>(std::ceil(center + support));
    lo = std::max(lo, 0);
    hi = std::min(hi, source_size);
    std::vector<float>& w = taps.weights[static_cast<size_t>(i)];
    double total = 0;
    std::vector<double> raw;
    for (int k = lo; k < hi; ++k) {
      const double d = std::fabs((k + 0.5 - center) / support);
      raw.push_back(d < 1 ? 1 - d : 0);
      total += raw.back();
    }
    if (total <= 0) {  // degenerate (a region thinner than a pixel at the border): nearest pixel
      const int k = std::clamp(static_cast<int>(center), 0, source_size - 1);
      taps.first[static_cast<size_t>(i)] = k;
      w.assign(1, 1.0f);
      continue;
    }
    // Trim zero-weight taps at both ends, so the inner loops touch only contributing pixels.
    size_t a = 0, b = raw.size();
    while (a < b && raw[a] == 0) ++a;
    while (b > a && raw[b - 1] == 0) --b;
    taps.first[static_cast<size_t>(i)] = lo + static_cast<int>(a);
    for (size_t k = a; k < b; ++k) w.push_back(static_cast<float>(raw[k] / total));
  }
  return taps;
}

void resize_region(const ImageView& source, const CropRegion& region, int out_width, int out_height, bool flip,
                   uint8_t* out) {
  DTRAIN_CHECK(region.width > 0 && region.height > 0 && region.x >= 0 && region.y >= 0 &&
               region.x + region.width <= source.width + 1e-6 && region.y + region.height <= source.height + 1e-6)
      << "crop region " << region.x << "," << region.y << " " << region.width << "x" << region.height
      << " outside the " << source.width << "x" << source.height << " image";
  const int c = source.channels;
  const ResampleTaps across = resample_taps(region.x, region.width, source.width, out_width);
  const ResampleTaps down = resample_taps(region.y, region.height, source.height, out_height);
  // Only the source rows some output row reads are filtered horizontally, once each.
  const int row_lo = down.first.front();
  int row_hi = row_lo;
  for (size_t i = 0; i < down.first.size(); ++i) {
    row_hi = std::max(row_hi, down.first[i] + static_cast<int>(down.weights[i].size()));
  }
  const size_t row_floats = static_cast<size_t>(out_width) * c;
  std::vector<float> rows(static_cast<size_t>(row_hi - row_lo) * row_floats);
  for (int y = row_lo; y < row_hi; ++y) {
    const uint8_t* src = source.pixels + static_cast<long>(y) * source.stride;
    float* dst = rows.data() + static_cast<size_t>(y - row_lo) * row_floats;
    for (int x = 0; x < out_width; ++x) {
      const int ox = flip ? out_width - 1 - x : x;
      const std::vector<float>& w = across.weights[static_cast<size_t>(x)];
      const uint8_t* p = src + static_cast<long>(across.first[static_cast<size_t>(x)]) * c;
      for (int ch = 0; ch < c; ++ch) {
        float sum = 0;
        for (size_t k = 0; k < w.size(); ++k) sum += w[k] * p[static_cast<long>(k) * c + ch];
        dst[static_cast<size_t>(ox) * c + ch] = sum;
      }
    }
  }
  std::vector<float> acc(row_floats);
  for (int y = 0; y < out_height; ++y) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    const std::vector<float>& w = down.weights[static_cast<size_t>(y)];
    const int first = down.first[static_cast<size_t>(y)];
    for (size_t k = 0; k < w.size(); ++k) {
      const float* row = rows.data() + static_cast<size_t>(first + static_cast<int>(k) - row_lo) * row_floats;
      for (size_t i = 0; i < row_floats; ++i) acc[i] += w[k] * row[i];
    }
    uint8_t* o = out + static_cast<size_t>(y) * row_floats;
    for (size_t i = 0; i < row_floats; ++i) o[i] = static_cast<uint8_t>(std::clamp(std::lround(acc[i]), 0L, 255L));
  }
}

}  // namespace dtrain::train
