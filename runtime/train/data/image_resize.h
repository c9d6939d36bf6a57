#pragma once
// Resamples a rectangle of an 8-bit interleaved image to an output size with a triangle (bilinear)
// filter whose support widens with the downscale factor, so shrinking averages every source pixel
// instead of skipping some (what PIL and torchvision's antialiased resize do). Separable: a
// horizontal pass into a float row buffer, then a vertical pass, each with precomputed weights.
//
// Speed (the loader runs this once per training image): each axis's taps are a flat table with the
// same number of taps for every output pixel (zero-padded), cached per geometry; the row buffers are
// per thread and reused, so a call allocates nothing once warm; the inner loops have fixed trip
// counts and are compiled for AVX2/FMA as well as the baseline, picked at run time.
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
// must lie inside the image. flip mirrors the output horizontally. Thread-safe.
void resize_region(const ImageView& source, const CropRegion& region, int out_width, int out_height, bool flip,
                   uint8_t* out);

// The filter's taps for one axis: output i reads source[first[i] .. first[i] + taps) with weights
// weights[i * taps .. (i + 1) * taps), which sum to 1; unused trailing taps weigh 0 and stay inside
// the source.
struct ResampleTaps {
  int taps = 0;
  std::vector<int> first;
  std::vector<float> weights;  // out_size x taps
};

// Taps for mapping [start, start + length) of a source axis of `source_size` pixels onto `out_size`.
ResampleTaps resample_taps(double start, double length, int source_size, int out_size);

}  // namespace dtrain::train
