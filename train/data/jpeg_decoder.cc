#include "train/data/jpeg_decoder.h"

#include <jpeglib.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>  // before jpeglib.h, which needs FILE
#include <memory>

#include "runtime/base/error.h"

namespace dtrain::train {
namespace {

struct TjDestroy {
  void operator()(void* handle) const { tjDestroy(handle); }
};
using TjHandle = std::unique_ptr<void, TjDestroy>;

// Adobe-style (inverted) CMYK, which is what CMYK JPEGs in the wild carry, to RGBX, in place.
void cmyk_to_rgbx(std::vector<uint8_t>* pixels) {
  static_assert(DecodedImage::kPixelBytes == 4);
  for (size_t i = 0; i < pixels->size(); i += 4) {
    uint8_t* p = pixels->data() + i;
    const unsigned k = p[3];
    for (int c = 0; c < 3; ++c) p[c] = static_cast<uint8_t>((p[c] * k + 127) / 255);
  }
}

// A damaged header can declare nonsense dimensions that libjpeg accepts.
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

namespace {

// libjpeg reports errors through a handler that must not return: it jumps back into decode_jpeg
// with the message. Warnings (a truncated or damaged file) are errors too.
struct JpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf escape;
  char message[JMSG_LENGTH_MAX + 32];
};

[[noreturn]] void jump_out(j_common_ptr c, const char* prefix) {
  auto* errors = reinterpret_cast<JpegErrors*>(c->err);
  char text[JMSG_LENGTH_MAX];
  c->err->format_message(c, text);
  std::snprintf(errors->message, sizeof(errors->message), "%s%s", prefix, text);
  std::longjmp(errors->escape, 1);
}

void on_error(j_common_ptr c) {
  jump_out(c, "");
}
void on_message(j_common_ptr c, int level) {
  if (level < 0) jump_out(c, "libjpeg-turbo warning: ");
}

// A progressive file may hold any number of scans, each a pass over the whole image: past this
// many (libjpeg-turbo's own limit in TJFLAG_LIMITSCANS) the file is refused.
constexpr int kMaxScans = 500;

struct ScanLimit {
  jpeg_progress_mgr mgr;
};

void on_progress(j_common_ptr c) {
  const auto* d = reinterpret_cast<j_decompress_ptr>(c);
  if (c->is_decompressor && d->input_scan_number > kMaxScans) {
    auto* errors = reinterpret_cast<JpegErrors*>(c->err);
    std::snprintf(errors->message, sizeof(errors->message), "progressive JPEG with more than %d scans", kMaxScans);
    std::longjmp(errors->escape, 1);
  }
}

// One decompressor per thread, created once and reset after each image (also after a failure).
struct ThreadDecompressor {
  jpeg_decompress_struct cinfo{};
  JpegErrors errors{};
  ScanLimit progress{};
  ThreadDecompressor() {
    cinfo.err = jpeg_std_error(&errors.mgr);
    errors.mgr.error_exit = on_error;
    errors.mgr.emit_message = on_message;
    jpeg_create_decompress(&cinfo);
    progress.mgr.progress_monitor = on_progress;
    cinfo.progress = &progress.mgr;
  }
  ~ThreadDecompressor() { jpeg_destroy_decompress(&cinfo); }
};

// The calling thread's decompressor: headers and images alike go through it, and every use ends
// in jpeg_abort_decompress, so a refused file leaves nothing behind for the next one. (TurboJPEG's
// header call did leave state behind: after a refused header the thread's next good files failed
// with "two SOI markers".)
ThreadDecompressor& thread_decompressor() {
  thread_local ThreadDecompressor d;
  return d;
}

// TurboJPEG's TJCS_* for libjpeg's colour space of the file.
int turbojpeg_colorspace(J_COLOR_SPACE space) {
  switch (space) {
    case JCS_GRAYSCALE: return TJCS_GRAY;
    case JCS_RGB: return TJCS_RGB;
    case JCS_CMYK: return TJCS_CMYK;
    case JCS_YCCK: return TJCS_YCCK;
    default: return TJCS_YCbCr;
  }
}

// The smallest n/8 of n = 1, 2, 4, 8 (the scales with SIMD inverse DCTs) at which the region still
// spans min_width x min_height.
int scale_eighths(double region_width, double region_height, int min_width, int min_height) {
  int n = 8;
  while (n > 1 && region_width * (n / 2) / 8 >= min_width && region_height * (n / 2) / 8 >= min_height) n /= 2;
  return n;
}

// See JpegHeader::hardware_decodable.
bool hardware_decodable(const jpeg_decompress_struct& cinfo) {
  if (cinfo.progressive_mode || cinfo.arith_code || cinfo.data_precision != 8) return false;
  if (cinfo.num_components == 1) return cinfo.jpeg_color_space == JCS_GRAYSCALE;
  if (cinfo.num_components != 3 || cinfo.jpeg_color_space != JCS_YCbCr) return false;
  const jpeg_component_info* c = cinfo.comp_info;
  const bool luma_ok = c[0].h_samp_factor <= 2 && c[0].v_samp_factor <= 2;
  const bool chroma_full =
      c[1].h_samp_factor == 1 && c[1].v_samp_factor == 1 && c[2].h_samp_factor == 1 && c[2].v_samp_factor == 1;
  return luma_ok && chroma_full;
}

}  // namespace

bool read_jpeg_header(const uint8_t* data, size_t size, JpegHeader* header, std::string* error, int64_t max_pixels) {
  ThreadDecompressor& d = thread_decompressor();
  jpeg_decompress_struct& cinfo = d.cinfo;
  if (setjmp(d.errors.escape)) {
    *error = d.errors.message;
    jpeg_abort_decompress(&cinfo);
    return false;
  }
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  header->width = static_cast<int>(cinfo.image_width);
  header->height = static_cast<int>(cinfo.image_height);
  header->colorspace = turbojpeg_colorspace(cinfo.jpeg_color_space);
  header->hardware_decodable = hardware_decodable(cinfo);
  jpeg_abort_decompress(&cinfo);
  return plausible_size(header->width, header->height, max_pixels, error);
}

bool decode_jpeg(const uint8_t* data, size_t size, const JpegHeader& header, const CropRegion& region, int min_width,
                 int min_height, DecodedImage* image, std::string* error) {
  ThreadDecompressor& d = thread_decompressor();
  jpeg_decompress_struct& cinfo = d.cinfo;
  const bool cmyk = header.colorspace == TJCS_CMYK || header.colorspace == TJCS_YCCK;
  std::vector<uint8_t>& target = image->rgbx;
  // Everything libjpeg may jump over is set up before this point (no C++ object lives in the
  // frames between here and the library).
  if (setjmp(d.errors.escape)) {
    *error = d.errors.message;
    jpeg_abort_decompress(&cinfo);
    return false;
  }
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.scale_num = static_cast<unsigned>(scale_eighths(region.width, region.height, min_width, min_height));
  cinfo.scale_denom = 8;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_EXT_RGBX;
  jpeg_start_decompress(&cinfo);
  const int scaled_width = static_cast<int>(cinfo.output_width), scaled_height = static_cast<int>(cinfo.output_height);
  image->scale = static_cast<double>(scaled_width) / header.width;
  // The window of scaled pixels that covers the region (its filter taps included).
  const double s = image->scale;
  const int x0 = std::clamp(static_cast<int>(std::floor(region.x * s)) - 1, 0, scaled_width - 1);
  const int x1 = std::clamp(static_cast<int>(std::ceil((region.x + region.width) * s)) + 1, x0 + 1, scaled_width);
  const int y0 = std::clamp(static_cast<int>(std::floor(region.y * s)) - 1, 0, scaled_height - 1);
  const int y1 = std::clamp(static_cast<int>(std::ceil((region.y + region.height) * s)) + 1, y0 + 1, scaled_height);
  JDIMENSION x_offset = static_cast<JDIMENSION>(x0), width = static_cast<JDIMENSION>(x1 - x0);
  if (width < cinfo.output_width) jpeg_crop_scanline(&cinfo, &x_offset, &width);  // widens to iMCU columns
  if (y0 > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(y0));
  const size_t stride = static_cast<size_t>(cinfo.output_width) * DecodedImage::kPixelBytes;
  target.resize(stride * static_cast<size_t>(y1 - y0));
  while (cinfo.output_scanline < static_cast<JDIMENSION>(y1)) {
    JSAMPROW row = target.data() + stride * (cinfo.output_scanline - static_cast<JDIMENSION>(y0));
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  image->x0 = static_cast<int>(x_offset);
  image->y0 = y0;
  image->width = static_cast<int>(cinfo.output_width);
  image->height = y1 - y0;
  // The rows below the window are never decoded.
  jpeg_abort_decompress(&cinfo);
  if (cmyk) cmyk_to_rgbx(&image->rgbx);
  return true;
}

ImageView window_view(const DecodedImage& image) {
  return ImageView{image.rgbx.data(),
                   image.width,
                   image.height,
                   3,
                   static_cast<long>(image.width) * DecodedImage::kPixelBytes,
                   DecodedImage::kPixelBytes};
}

CropRegion region_in_window(const CropRegion& region, const DecodedImage& image) {
  const double s = image.scale;
  CropRegion scaled{std::max(0.0, region.x * s - image.x0), std::max(0.0, region.y * s - image.y0), region.width * s,
                    region.height * s};
  scaled.width = std::min(scaled.width, image.width - scaled.x);
  scaled.height = std::min(scaled.height, image.height - scaled.y);
  return scaled;
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
