#pragma once
// Resamples a rectangle of an 8-bit interleaved image to an output size with a triangle (bilinear)
// filter whose support widens with the downscale factor, so shrinking averages every source pixel
// instead of skipping some (what PIL and torchvision's antialiased resize do). Separable: a
// horizontal pass into a float row buffer, then a vertical pass, each with precomputed weights.
#include <cstdint>
#include <vector>

#include "runtime/train/data/crop_geometry.h"

namespace dtrain::train {

struct ImageView {
  const uint8_t* pixels = nullptr;  // rows of width x channels bytes, `stride` bytes apart
  int width = 0, height = 0, channels = 0;
  long stride = 0;
};

// Writes out_height rows of out_width x channels bytes (HWC). `region` is in source pixels and
// must lie inside the image. flip mirrors the output horizontally.
void resize_region(const ImageView& source, const CropRegion& region, int out_width, int out_height, bool flip,
                   uint8_t* out);

// The filter's taps for one axis: output i reads source[first[i] .. first[i] + weights[i].size()).
struct ResampleTaps {
  std::vector<int> first;
  std::vector<std::vector<float>> weights;  // each row sums to 1
};

// Taps for mapping [start, start + length) of a source axis of `source_size` pixels onto `out_size`.
ResampleTaps resample_taps(double start, double length, int source_size, int out_size);

}  // namespace dtrain::train
