#pragma once
// The loader's crop-resize-flip (image_resize.h: a triangle filter whose support widens with the
// downscale, separable, horizontal sums first) on the GPU, for images the GPU decoded. The same
// arithmetic in the same order, rounded the same way (no fused multiply-adds), so an image gives
// the host's resize_region bytes exactly. What differs from the host's loader is the source: nvJPEG
// decodes at full size, the loader at the DCT scale that still covers the crop.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace dtrain::train::cuda {

struct CropResizeJob {
  const uint8_t* source = nullptr;  // interleaved RGB on the device, `pitch` bytes per row
  int width = 0, height = 0;
  long pitch = 0;
  double x = 0, y = 0, region_width = 0, region_height = 0;  // the crop, in source pixels
  int flip = 0;
  int position = 0;  // the image's place in the output batch
  // Where the job's filter taps go in the `taps` scratch (crop_resize_tap_floats), and how many
  // per output pixel on each axis: set by crop_resize_layout.
  long taps_offset = 0;
  int taps_across = 0, taps_down = 0;
};

// Lays the jobs' filter tables out in one scratch array: sets each job's taps_offset and tap
// counts, and returns the floats the scratch needs.
long crop_resize_layout(CropResizeJob* jobs, int count, int out_height, int out_width);

// For each of `count` jobs (on the device, laid out by crop_resize_layout), writes out_height x
// out_width x 3 bytes at out + position x out_height x out_width x 3. `taps`: the scratch, on the
// device. Queued on `stream`.
void crop_resize_images(cudaStream_t stream, const CropResizeJob* jobs, int count, int out_height, int out_width,
                        float* taps, uint8_t* out);

}  // namespace dtrain::train::cuda
