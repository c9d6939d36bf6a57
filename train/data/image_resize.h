#pragma once
// Resamples a rectangle of an 8-bit interleaved image to an output size with a triangle (bilinear)
// filter whose support widens with the downscale factor, so shrinking averages every source pixel
// instead of skipping some (what PIL and torchvision's antialiased resize do). Separable: a
// horizontal pass into a float row buffer, then a vertical pass, each with precomputed weights.
//
// Speed (the loader runs this once per training image): each axis's taps are a flat table with the
// same number of taps for every output pixel (zero-padded), cached per geometry; the row buffers are
// per thread and reused, so a call allocates nothing once warm; the inner loops have fixed trip
// counts and are compiled for AVX2 as well as the baseline, picked at run time.
#include <cstdint>
#include <vector>

#include "train/data/crop_geometry.h"

namespace dtrain::train {

struct ImageView {
  const uint8_t* pixels = nullptr;  // rows of width pixels, `stride` bytes apart
  int width = 0, height = 0, channels = 0;
  long stride = 0;
  // Bytes per pixel in memory: `channels`, or 4 for RGB stored as RGBX (what the JPEG decoder
  // writes: one pixel is one 32-bit word, which the horizontal pass loads as a vector).
  int pixel_bytes = 0;  // 0: channels
};

// Writes out_height rows of out_width x channels bytes (HWC; an RGBX source gives RGB). `region` is in source pixels
// and must lie inside the image. flip mirrors the output horizontally. Thread-safe.
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

// Taps per output pixel when mapping `length` source pixels onto `out_size`: the triangle's span,
// 2 ceil(support) + 2 (support = max(1, length / out_size)). The tables below and the GPU's
// (crop_resize_images) are laid out with this stride.
int resample_tap_bound(double length, int out_size);

// Taps for mapping [start, start + length) of a source axis of `source_size` pixels onto `out_size`.
// Written into `taps`, reusing its memory.
void fill_resample_taps(double start, double length, int source_size, int out_size, ResampleTaps* taps);

}  // namespace dtrain::train
