#pragma once
// JPEG decoding with libjpeg-turbo (TurboJPEG for headers and encoding, the libjpeg API for region
// decoding). When the crop that will be taken is much larger than the output, the image is decoded
// at a reduced DCT scale (1/2, 1/4, 1/8): libjpeg
// then skips most of the inverse DCT work, which is where decoding time goes for ImageNet's
// ~400x350 images cut to 224x224 crops of 8%..100% of their area.
// Any problem libjpeg-turbo reports, warnings included (a truncated file decodes "successfully"
// with a grey bottom), makes the file bad: the caller skips it. So does a progressive file with an
// absurd number of scans (libjpeg-turbo's scan limit, 500), which would otherwise take minutes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "train/data/crop_geometry.h"
#include "train/data/image_resize.h"

namespace dtrain::train {

// Larger than any photograph of a public training set (ImageNet's largest is ~15 megapixels).
constexpr int64_t kDefaultMaxImagePixels = 64'000'000;

struct JpegHeader {
  int width = 0;
  int height = 0;
  int colorspace = 0;  // TurboJPEG's TJCS_*
  // Baseline Huffman coding, 8 bits, YCbCr with 4:4:4, 4:2:2, 4:4:0 or 4:2:0 chroma, or grey:
  // what nvJPEG's hardware decoder takes (it refuses progressive and arithmetic coding, CMYK and
  // 4:1:1); the GPU engine still asks the decoder itself before sending a file.
  bool hardware_decodable = false;
};

struct DecodedImage {
  // RGB stored as RGBX: one 32-bit word per pixel, which the resize loads as a vector (the padding
  // byte's value is unspecified).
  static constexpr int kPixelBytes = 4;
  std::vector<uint8_t> rgbx;  // height x width x kPixelBytes: the decoded window
  int width = 0;
  int height = 0;
  int x0 = 0, y0 = 0;  // the window's top-left corner in the scaled image
  double scale = 1;    // scaled image size / original size
};

// Reads size and colour space; false with the library's reason when the bytes are not a readable
// JPEG, or claim an implausible size or more than `max_pixels` pixels (a decompression bomb is
// refused here, before any decoding).
bool read_jpeg_header(const uint8_t* data, size_t size, JpegHeader* header, std::string* error,
                      int64_t max_pixels = kDefaultMaxImagePixels);

// Decodes the part of the JPEG whose `header` read_jpeg_header gave that covers `region` (in
// original pixels; the crop is chosen from the header first) to RGBX (grey and CMYK/YCCK are
// converted), at the smallest DCT scale of 1/8, 1/4, 1/2 or 1 at which the region still spans
// min_width x min_height. Only those scales have SIMD inverse DCTs in libjpeg-turbo: the others
// (3/8, 5/8, ...) run its C code, and decoding the ResNet loader's crops at them was 6% slower
// overall than decoding more pixels at the next power of two.
// Only that part is decoded: rows above the region are skipped without the inverse DCT, columns
// outside its iMCU columns are entropy-decoded only, and rows below it are not read at all
// (libjpeg-turbo's jpeg_skip_scanlines / jpeg_crop_scanline). The window is a pixel wider than
// the region on every side where the image allows, for the resize filter's taps. A damaged part
// of a file outside the window goes unnoticed for this crop, and is found when a crop covers it.
// Thread-safe: each thread uses its own decompressor. `image`'s memory is reused across calls.
bool decode_jpeg(const uint8_t* data, size_t size, const JpegHeader& header, const CropRegion& region, int min_width,
                 int min_height, DecodedImage* image, std::string* error);

// What decode_jpeg gave, as the resize's source: the decoded window, and `region` (in the
// original image's pixels) in the window's coordinates, clipped to it.
ImageView window_view(const DecodedImage& image);
CropRegion region_in_window(const CropRegion& region, const DecodedImage& image);

// RGB (height x width x 3) to a baseline JPEG at `quality`: for generating test data.
std::vector<uint8_t> encode_jpeg(const uint8_t* rgb, int width, int height, int quality);

}  // namespace dtrain::train
