#include "runtime/train/data/jpeg_decoder.h"

#include <turbojpeg.h>

#include <memory>

#include "runtime/core/error.h"

namespace dtrain::train {
namespace {

struct TjDestroy {
  void operator()(void* handle) const { tjDestroy(handle); }
};
using TjHandle = std::unique_ptr<void, TjDestroy>;

tjhandle thread_decompressor() {
  thread_local TjHandle handle(tjInitDecompress());
  DTRAIN_CHECK(handle != nullptr) << "tjInitDecompress failed: " << tjGetErrorStr2(nullptr);
  return handle.get();
}

std::string library_error(tjhandle handle) {
  const std::string text = tjGetErrorStr2(handle);
  return tjGetErrorCode(handle) == TJERR_WARNING ? "libjpeg-turbo warning: " + text : text;
}

// Adobe-style (inverted) CMYK, which is what CMYK JPEGs in the wild carry, to RGB.
void cmyk_to_rgb(const std::vector<uint8_t>& cmyk, std::vector<uint8_t>* rgb) {
  const size_t pixels = cmyk.size() / 4;
  rgb->resize(pixels * 3);
  for (size_t i = 0; i < pixels; ++i) {
    const unsigned k = cmyk[4 * i + 3];
    for (int c = 0; c < 3; ++c) (*rgb)[3 * i + c] = static_cast<uint8_t>((cmyk[4 * i + c] * k + 127) / 255);
  }
}

// TurboJPEG can accept the header of a damaged file with nonsense dimensions.
bool plausible_size(int width, int height, int64_t max_pixels, std::string* error) {
  if (width <= 0 || height <= 0 || width > 65535 || height > 65535) {
    *error = "implausible image size " + std::to_string(width) + "x" + std::to_string(height) + " in the header";
    return false;
  }
  if (int64_t{width} * height > max_pixels) {
    *error = "image of " + std::to_string(width) + "x" + std::to_string(height) + " pixels is over the cap of " +
             std::to_string(max_pixels) + " pixels (max_image_pixels)";
    return false;
  }
  return true;
}

}  // namespace

bool read_jpeg_header(const uint8_t* data, size_t size, JpegHeader* header, std::string* error,
                      int64_t max_pixels) {
  tjhandle tj = thread_decompressor();
  int subsampling = 0;
  if (tjDecompressHeader3(tj, data, static_cast<unsigned long>(size), &header->width, &header->height, &subsampling,
                          &header->colorspace) != 0) {
    *error = library_error(tj);
    return false;
  }
  return plausible_size(header->width, header->height, max_pixels, error);
}

bool decode_jpeg(const uint8_t* data, size_t size, const JpegHeader& header, double region_width,
                 double region_height, int min_width, int min_height, DecodedImage* image, std::string* error) {
  tjhandle tj = thread_decompressor();
  int factor_count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&factor_count);
  tjscalingfactor chosen{1, 1};
  for (int i = 0; i < factor_count; ++i) {
    const tjscalingfactor f = factors[i];
    const double s = static_cast<double>(f.num) / f.denom;
    const double chosen_s = static_cast<double>(chosen.num) / chosen.denom;
    if (s < chosen_s && region_width * s >= min_width && region_height * s >= min_height) chosen = f;
  }
  image->width = TJSCALED(header.width, chosen);
  image->height = TJSCALED(header.height, chosen);
  image->scale = static_cast<double>(image->width) / header.width;
  const bool cmyk = header.colorspace == TJCS_CMYK || header.colorspace == TJCS_YCCK;
  thread_local std::vector<uint8_t> cmyk_pixels;
  std::vector<uint8_t>& target = cmyk ? cmyk_pixels : image->rgb;
  target.resize(static_cast<size_t>(image->width) * image->height * (cmyk ? 4 : 3));
  if (tjDecompress2(tj, data, static_cast<unsigned long>(size), target.data(), image->width, 0, image->height,
                    cmyk ? TJPF_CMYK : TJPF_RGB, TJFLAG_LIMITSCANS) != 0) {
    *error = library_error(tj);
    return false;
  }
  if (cmyk) cmyk_to_rgb(cmyk_pixels, &image->rgb);
  return true;
}

std::vector<uint8_t> encode_jpeg(const uint8_t* rgb, int width, int height, int quality) {
  TjHandle tj(tjInitCompress());
  DTRAIN_CHECK(tj != nullptr) << "tjInitCompress failed: " << tjGetErrorStr2(nullptr);
  unsigned char* jpeg = nullptr;
  unsigned long bytes = 0;
  DTRAIN_CHECK(tjCompress2(tj.get(), rgb, width, 0, height, TJPF_RGB, &jpeg, &bytes, TJSAMP_420, quality, 0) == 0)
      << "tjCompress2: " << tjGetErrorStr2(tj.get());
  std::vector<uint8_t> out(jpeg, jpeg + bytes);
  tjFree(jpeg);
  return out;
}

}  // namespace dtrain::train
