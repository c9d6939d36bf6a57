// The image pipeline's pieces: crop geometry, the antialiased resize against a float64 reference,
// and JPEG decoding with DCT-domain scaling.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/support/hostile_jpegs.h"
#include "tests/support/test_seed.h"
#include "train/data/crop_geometry.h"
#include "train/data/image_resize.h"
#include "train/data/jpeg_decoder.h"

namespace dtrain::train {
namespace {

std::mt19937_64 fresh_rng() {
  return std::mt19937_64(dtrain::test::random_seed());
}

// The same triangle filter written directly in float64, one output pixel at a time, with no tap
// tables and no separable passes.
// `pixel_bytes` apart: channels, or 4 for RGBX.
double reference_pixel(const std::vector<uint8_t>& img, int w, int h, int pixel_bytes, const CropRegion& r, int ow,
                       int oh, int ox, int oy, int ch) {
  auto axis_weight = [](double k, double center, double support) {
    const double d = std::fabs((k + 0.5 - center) / support);
    return d < 1 ? 1 - d : 0.0;
  };
  const double sx = r.width / ow, sy = r.height / oh;
  const double support_x = std::max(1.0, sx), support_y = std::max(1.0, sy);
  const double cx = r.x + (ox + 0.5) * sx, cy = r.y + (oy + 0.5) * sy;
  double total_x = 0, total_y = 0;
  for (int x = 0; x < w; ++x) total_x += axis_weight(x, cx, support_x);
  for (int y = 0; y < h; ++y) total_y += axis_weight(y, cy, support_y);
  double sum = 0;
  for (int y = 0; y < h; ++y) {
    const double wy = axis_weight(y, cy, support_y);
    if (wy == 0) continue;
    for (int x = 0; x < w; ++x)
      sum += wy * axis_weight(x, cx, support_x) * img[(static_cast<size_t>(y) * w + x) * pixel_bytes + ch];
  }
  return sum / (total_x * total_y);
}

TEST(ImageResize, MatchesFloat64ReferenceWhenShrinkingAndEnlarging) {
  std::mt19937_64 rng = fresh_rng();
  for (int trial = 0; trial < 18; ++trial) {
    // Grey, packed RGB, and RGB in RGBX pixels (the decoder's layout, whose kernels differ).
    const int w = 5 + static_cast<int>(rng() % 60), h = 5 + static_cast<int>(rng() % 60);
    const int c = trial % 3 == 0 ? 1 : 3, pb = trial % 3 == 2 ? 4 : c;
    std::vector<uint8_t> img(static_cast<size_t>(w) * h * pb);
    for (uint8_t& p : img) p = static_cast<uint8_t>(rng() & 255);
    std::uniform_real_distribution<double> u(0, 1);
    CropRegion r;
    r.width = 1 + u(rng) * (w - 1);
    r.height = 1 + u(rng) * (h - 1);
    r.x = u(rng) * (w - r.width);
    r.y = u(rng) * (h - r.height);
    const int ow = 1 + static_cast<int>(rng() % 70), oh = 1 + static_cast<int>(rng() % 70);
    const bool flip = trial % 2 == 0;  // with the layout's trial % 3: every layout both ways
    std::vector<uint8_t> out(static_cast<size_t>(ow) * oh * c);
    resize_region(ImageView{img.data(), w, h, c, static_cast<long>(w) * pb, pb}, r, ow, oh, flip, out.data());
    int worst = 0;
    for (int y = 0; y < oh; ++y) {
      for (int x = 0; x < ow; ++x) {
        for (int ch = 0; ch < c; ++ch) {
          const double want = reference_pixel(img, w, h, pb, r, ow, oh, flip ? ow - 1 - x : x, y, ch);
          const int got = out[(static_cast<size_t>(y) * ow + x) * c + ch];
          worst = std::max(worst, static_cast<int>(std::ceil(std::fabs(got - want) - 0.5 - 1e-3)));
        }
      }
    }
    // Rounding to 8 bits is the only allowed difference: within half a level, plus float32 slack.
    EXPECT_LE(worst, 0) << w << "x" << h << "x" << c << " in " << pb << " bytes, region " << r.x << "," << r.y << " "
                        << r.width << "x" << r.height << " -> " << ow << "x" << oh;
  }
}

// The RGBX kernels (one vector per pixel) form each sum as the packed-RGB kernels do, so the two
// layouts give the same bytes: for every tap count the kernels are specialised for (1-6) and the
// generic path beyond, with and without flip.
TEST(ImageResize, RgbxPixelsGiveTheSameBytesAsPackedRgb) {
  std::mt19937_64 rng = fresh_rng();
  for (int trial = 0; trial < 24; ++trial) {
    const int w = 20 + static_cast<int>(rng() % 300), h = 20 + static_cast<int>(rng() % 300);
    std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3), rgbx(static_cast<size_t>(w) * h * 4);
    for (size_t i = 0; i < static_cast<size_t>(w) * h; ++i) {
      for (int c = 0; c < 4; ++c) {
        const auto v = static_cast<uint8_t>(rng() & 255);
        rgbx[i * 4 + c] = v;
        if (c < 3) rgb[i * 3 + c] = v;
      }
    }
    // Output sides from 1/8 of the region (taps beyond 6: the generic path) to 3x (enlarging).
    const int ow = std::max(1, static_cast<int>(w * (0.12 + 3.0 * (rng() % 1000) / 1000.0)) % 400);
    const int oh = 1 + static_cast<int>(rng() % 300);
    const CropRegion r{0.5, 1.25, w - 1.0, h - 2.0};
    const bool flip = trial % 2 == 1;
    std::vector<uint8_t> from_rgb(static_cast<size_t>(ow) * oh * 3), from_rgbx(from_rgb.size());
    resize_region(ImageView{rgb.data(), w, h, 3, w * 3L}, r, ow, oh, flip, from_rgb.data());
    resize_region(ImageView{rgbx.data(), w, h, 3, w * 4L, 4}, r, ow, oh, flip, from_rgbx.data());
    ASSERT_EQ(from_rgb, from_rgbx) << w << "x" << h << " -> " << ow << "x" << oh << (flip ? " flipped" : "");
  }
}

TEST(ImageResize, TapsSumToOneAndConstantImagesStayConstant) {
  ResampleTaps taps;
  fill_resample_taps(3.25, 40.5, 50, 7, &taps);
  ASSERT_EQ(taps.weights.size(), taps.first.size() * static_cast<size_t>(taps.taps));
  for (size_t i = 0; i < taps.first.size(); ++i) {
    double sum = 0;
    for (int k = 0; k < taps.taps; ++k)
      sum += taps.weights[i * static_cast<size_t>(taps.taps) + static_cast<size_t>(k)];
    EXPECT_NEAR(sum, 1.0, 1e-6);
    EXPECT_LE(taps.first[i] + taps.taps, 50);  // every tap inside the source
  }
  std::vector<uint8_t> img(30 * 20 * 3, 77), out(9 * 11 * 3);
  resize_region(ImageView{img.data(), 30, 20, 3, 90}, CropRegion{2, 1, 25, 18}, 9, 11, false, out.data());
  for (uint8_t v : out) EXPECT_EQ(v, 77);
}

TEST(CropGeometry, RandomResizedCropStaysInsideWithinScaleAndRatio) {
  std::mt19937_64 rng = fresh_rng();
  for (int i = 0; i < 2000; ++i) {
    const int w = 100 + static_cast<int>(rng() % 600), h = 100 + static_cast<int>(rng() % 600);
    const CropRegion r = random_resized_crop(w, h, rng);
    ASSERT_GE(r.x, 0);
    ASSERT_GE(r.y, 0);
    ASSERT_LE(r.x + r.width, w);
    ASSERT_LE(r.y + r.height, h);
    const double area = r.width * r.height / (static_cast<double>(w) * h);
    const double ratio = r.width / r.height;
    // Rounding w and h to whole pixels moves area and ratio slightly past the drawn bounds.
    EXPECT_GE(area, 0.08 * 0.8);
    EXPECT_LE(area, 1.0);
    EXPECT_GE(ratio, 0.75 * 0.85);
    EXPECT_LE(ratio, 4.0 / 3.0 / 0.85);
  }
}

TEST(CropGeometry, RandomResizedCropIsDeterministicAndFallsBackToAClampedCentre) {
  std::mt19937_64 a(5), b(5);
  for (int i = 0; i < 50; ++i) {
    const CropRegion x = random_resized_crop(400, 300, a), y = random_resized_crop(400, 300, b);
    EXPECT_EQ(x.x, y.x);
    EXPECT_EQ(x.width, y.width);
  }
  // A 1000x10 strip: no 3/4..4/3 crop of 8% of its area fits, so the centre with ratio 4/3.
  std::mt19937_64 rng(1);
  const CropRegion r = random_resized_crop(1000, 10, rng);
  EXPECT_EQ(r.height, 10);
  EXPECT_EQ(r.width, 13);
  EXPECT_EQ(r.x, std::floor((1000 - 13) / 2.0));
}

TEST(CropGeometry, ValidationCentreCropIsTheResizedCentreSquare) {
  const CropRegion r = center_crop_after_resize(500, 375, 256, 224);
  EXPECT_DOUBLE_EQ(r.width, 375.0 * 224 / 256);
  EXPECT_DOUBLE_EQ(r.height, r.width);
  EXPECT_DOUBLE_EQ(r.x, (500 - r.width) / 2);
  EXPECT_DOUBLE_EQ(r.y, (375 - r.width) / 2);
}

std::vector<uint8_t> smooth_image(int w, int h, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> phase(0, 6.28);
  const double p[3] = {phase(rng), phase(rng), phase(rng)};
  std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < 3; ++c) {
        rgb[(static_cast<size_t>(y) * w + x) * 3 + c] =
            static_cast<uint8_t>(128 + 100 * std::sin(p[c] + x * 0.05 + y * 0.03 * (c + 1)));
      }
    }
  }
  return rgb;
}

// The decoded window's RGB, without the padding byte of each RGBX pixel.
std::vector<uint8_t> rgb_of(const DecodedImage& image) {
  std::vector<uint8_t> rgb;
  rgb.reserve(image.rgbx.size() / DecodedImage::kPixelBytes * 3);
  for (size_t i = 0; i < image.rgbx.size(); i += DecodedImage::kPixelBytes) {
    rgb.insert(rgb.end(), image.rgbx.begin() + static_cast<long>(i), image.rgbx.begin() + static_cast<long>(i) + 3);
  }
  return rgb;
}

double mean_abs_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  EXPECT_EQ(a.size(), b.size());
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += std::fabs(double(a[i]) - double(b[i]));
  return sum / static_cast<double>(a.size());
}

JpegHeader header_of(const std::vector<uint8_t>& jpeg) {
  JpegHeader header;
  std::string error;
  EXPECT_TRUE(read_jpeg_header(jpeg.data(), jpeg.size(), &header, &error)) << error;
  return header;
}

CropRegion whole(int w, int h) {
  return CropRegion{0, 0, static_cast<double>(w), static_cast<double>(h)};
}

TEST(JpegDecoder, DecodesFullSizeCloseToTheSource) {
  std::mt19937_64 rng = fresh_rng();
  const int w = 320, h = 240;
  const std::vector<uint8_t> rgb = smooth_image(w, h, rng);
  const std::vector<uint8_t> jpeg = encode_jpeg(rgb.data(), w, h, 95);
  const JpegHeader header = header_of(jpeg);
  EXPECT_EQ(header.width, w);
  EXPECT_EQ(header.height, h);
  DecodedImage image;
  std::string error;
  ASSERT_TRUE(decode_jpeg(jpeg.data(), jpeg.size(), header, whole(w, h), w, h, &image, &error)) << error;
  EXPECT_EQ(image.width, w);
  EXPECT_EQ(image.height, h);
  EXPECT_EQ(image.scale, 1.0);
  EXPECT_LT(mean_abs_difference(rgb_of(image), rgb), 2.0);
}

TEST(JpegDecoder, ScaledDecodeMatchesAFullDecodeResized) {
  std::mt19937_64 rng = fresh_rng();
  const int w = 320, h = 240;
  const std::vector<uint8_t> rgb = smooth_image(w, h, rng);
  const std::vector<uint8_t> jpeg = encode_jpeg(rgb.data(), w, h, 95);
  const JpegHeader header = header_of(jpeg);
  DecodedImage full, scaled;
  std::string error;
  ASSERT_TRUE(decode_jpeg(jpeg.data(), jpeg.size(), header, whole(w, h), w, h, &full, &error)) << error;
  // The whole image becomes 40x30: the 1/8 DCT scale is exactly enough.
  ASSERT_TRUE(decode_jpeg(jpeg.data(), jpeg.size(), header, whole(w, h), 40, 30, &scaled, &error)) << error;
  EXPECT_EQ(scaled.width, 40);
  EXPECT_EQ(scaled.height, 30);
  EXPECT_DOUBLE_EQ(scaled.scale, 0.125);
  // Only 1/8, 1/4, 1/2 and 1 are used (the scales with SIMD inverse DCTs), the smallest that covers
  // the region: of a 160x120 area, 50x50 needs 1/2 (1/4 gives 30 rows), 61x61 needs 1 (1/2 gives 60).
  DecodedImage partial;
  ASSERT_TRUE(decode_jpeg(jpeg.data(), jpeg.size(), header, CropRegion{0, 0, 160, 120}, 50, 50, &partial, &error))
      << error;
  EXPECT_DOUBLE_EQ(partial.scale, 0.5);
  ASSERT_TRUE(decode_jpeg(jpeg.data(), jpeg.size(), header, CropRegion{0, 0, 160, 120}, 61, 61, &partial, &error))
      << error;
  EXPECT_DOUBLE_EQ(partial.scale, 1.0);
  std::vector<uint8_t> resized(40 * 30 * 3);
  resize_region(ImageView{full.rgbx.data(), w, h, 3, w * 4L, DecodedImage::kPixelBytes},
                CropRegion{0, 0, double(w), double(h)}, 40, 30, false, resized.data());
  EXPECT_LT(mean_abs_difference(rgb_of(scaled), resized), 4.0);
}

// A region decode (rows above skipped, columns outside cropped, rows below never read) gives the
// pixels a whole-image decode at the same scale gives there, for regions anywhere in the image.
TEST(JpegDecoder, RegionDecodeMatchesTheWholeImageDecode) {
  std::mt19937_64 rng = fresh_rng();
  const int w = 333, h = 250;
  const std::vector<uint8_t> rgb = smooth_image(w, h, rng);
  {
    const std::vector<uint8_t> jpeg = encode_jpeg(rgb.data(), w, h, 90);
    const JpegHeader header = header_of(jpeg);
    std::string error;
    for (int trial = 0; trial < 20; ++trial) {
      const CropRegion region = random_resized_crop(w, h, rng);
      const int min_side = 16 + static_cast<int>(rng() % 200);
      DecodedImage whole_image, part;
      ASSERT_TRUE(decode_jpeg(jpeg.data(), jpeg.size(), header, region, min_side, min_side, &part, &error)) << error;
      // The whole image at the scale the region decode chose.
      const CropRegion everything = whole(w, h);
      const int eighths = static_cast<int>(std::lround(part.scale * 8));
      const int min_whole = std::min(w, h) * eighths / 8;
      ASSERT_TRUE(
          decode_jpeg(jpeg.data(), jpeg.size(), header, everything, min_whole, min_whole, &whole_image, &error));
      ASSERT_EQ(whole_image.scale, part.scale);
      ASSERT_LE(part.x0 + part.width, whole_image.width);
      ASSERT_LE(part.y0 + part.height, whole_image.height);
      // The window covers the region.
      EXPECT_LE(part.x0, region.x * part.scale);
      EXPECT_LE(part.y0, region.y * part.scale);
      EXPECT_GE(part.x0 + part.width, std::min<double>(whole_image.width, (region.x + region.width) * part.scale));
      EXPECT_GE(part.y0 + part.height, std::min<double>(whole_image.height, (region.y + region.height) * part.scale));
      double total = 0;
      int worst = 0;
      const std::vector<uint8_t> part_rgb = rgb_of(part), whole_rgb = rgb_of(whole_image);
      for (int y = 0; y < part.height; ++y) {
        for (int x = 0; x < part.width * 3; ++x) {
          const int a = part_rgb[static_cast<size_t>(y) * part.width * 3 + static_cast<size_t>(x)];
          const int b = whole_rgb[static_cast<size_t>(y + part.y0) * whole_image.width * 3 + part.x0 * 3 +
                                  static_cast<size_t>(x)];
          total += std::abs(a - b);
          worst = std::max(worst, std::abs(a - b));
        }
      }
      // Chroma upsampling at the window's cut edges may differ by a few levels; nothing else.
      EXPECT_LT(total / (part.width * 3.0 * part.height), 0.5) << "trial " << trial;
      EXPECT_LE(worst, 24) << "trial " << trial;
    }
  }
}

// Greyscale and CMYK (TurboJPEG writes it as Adobe-inverted YCCK) files decode to the same RGBX
// pixels: grey as R = G = B, CMYK through R = C x K / 255 (K = 255 here, so R = C).
TEST(JpegDecoder, GreyAndCmykFilesDecodeToRgbx) {
  std::mt19937_64 rng = fresh_rng();
  const int w = 96, h = 64;
  const std::vector<uint8_t> rgb = smooth_image(w, h, rng);
  auto encode = [&](const std::vector<uint8_t>& pixels, int format, int subsampling) {
    tjhandle tj = tjInitCompress();
    unsigned char* out = nullptr;
    unsigned long bytes = 0;
    const int status = tjCompress2(tj, pixels.data(), w, 0, h, format, &out, &bytes, subsampling, 95, 0);
    std::vector<uint8_t> jpeg(out, out + (status == 0 ? bytes : 0));
    tjFree(out);
    tjDestroy(tj);
    return jpeg;
  };
  std::vector<uint8_t> grey(static_cast<size_t>(w) * h), cmyk(static_cast<size_t>(w) * h * 4);
  for (size_t i = 0; i < grey.size(); ++i) {
    grey[i] = rgb[3 * i + 1];
    for (int c = 0; c < 3; ++c) cmyk[4 * i + c] = rgb[3 * i + c];
    cmyk[4 * i + 3] = 255;
  }
  std::string error;
  {
    const std::vector<uint8_t> jpeg = encode(grey, TJPF_GRAY, TJSAMP_GRAY);
    ASSERT_FALSE(jpeg.empty());
    const JpegHeader header = header_of(jpeg);
    EXPECT_EQ(header.colorspace, TJCS_GRAY);
    DecodedImage image;
    ASSERT_TRUE(decode_jpeg(jpeg.data(), jpeg.size(), header, whole(w, h), w, h, &image, &error)) << error;
    ASSERT_EQ(image.rgbx.size(), static_cast<size_t>(w) * h * DecodedImage::kPixelBytes);
    double total = 0;
    for (size_t i = 0; i < grey.size(); ++i) {
      const uint8_t* p = &image.rgbx[i * DecodedImage::kPixelBytes];
      ASSERT_TRUE(p[0] == p[1] && p[1] == p[2]) << "grey pixel " << i << " is not grey";
      total += std::abs(int(p[0]) - int(grey[i]));
    }
    EXPECT_LT(total / static_cast<double>(grey.size()), 2.0);
  }
  {
    const std::vector<uint8_t> jpeg = encode(cmyk, TJPF_CMYK, TJSAMP_444);
    ASSERT_FALSE(jpeg.empty());
    const JpegHeader header = header_of(jpeg);
    EXPECT_TRUE(header.colorspace == TJCS_YCCK || header.colorspace == TJCS_CMYK) << header.colorspace;
    DecodedImage image;
    ASSERT_TRUE(decode_jpeg(jpeg.data(), jpeg.size(), header, whole(w, h), w, h, &image, &error)) << error;
    EXPECT_LT(mean_abs_difference(rgb_of(image), rgb), 3.0);
  }
}

// What jpeg_decoder gpu may leave to nvJPEG's hardware decoder: baseline YCbCr 4:2:0, 4:2:2, 4:4:0,
// 4:4:4 and grey; never CMYK, 4:1:1 or progressive files.
TEST(JpegDecoder, HardwareDecodableOnlyForBaselineYcbcrAndGrey) {
  std::mt19937_64 rng = fresh_rng();
  const int w = 64, h = 48;
  const std::vector<uint8_t> rgb = smooth_image(w, h, rng);
  auto encode = [&](const std::vector<uint8_t>& pixels, int format, int subsampling, int flags) {
    tjhandle tj = tjInitCompress();
    unsigned char* out = nullptr;
    unsigned long bytes = 0;
    const int status = tjCompress2(tj, pixels.data(), w, 0, h, format, &out, &bytes, subsampling, 90, flags);
    std::vector<uint8_t> jpeg(out, out + (status == 0 ? bytes : 0));
    tjFree(out);
    tjDestroy(tj);
    return jpeg;
  };
  std::vector<uint8_t> grey(static_cast<size_t>(w) * h), cmyk(static_cast<size_t>(w) * h * 4, 255);
  for (size_t i = 0; i < grey.size(); ++i) grey[i] = rgb[3 * i];
  const struct {
    const char* what;
    std::vector<uint8_t> jpeg;
    bool hardware;
  } cases[] = {{"4:2:0", encode(rgb, TJPF_RGB, TJSAMP_420, 0), true},
               {"4:2:2", encode(rgb, TJPF_RGB, TJSAMP_422, 0), true},
               {"4:4:0", encode(rgb, TJPF_RGB, TJSAMP_440, 0), true},
               {"4:4:4", encode(rgb, TJPF_RGB, TJSAMP_444, 0), true},
               {"grey", encode(grey, TJPF_GRAY, TJSAMP_GRAY, 0), true},
               {"4:1:1", encode(rgb, TJPF_RGB, TJSAMP_411, 0), false},
               {"CMYK", encode(cmyk, TJPF_CMYK, TJSAMP_444, 0), false},
               {"progressive 4:2:0", encode(rgb, TJPF_RGB, TJSAMP_420, TJFLAG_PROGRESSIVE), false}};
  for (const auto& c : cases) {
    ASSERT_FALSE(c.jpeg.empty()) << c.what;
    EXPECT_EQ(header_of(c.jpeg).hardware_decodable, c.hardware) << c.what;
  }
}

TEST(JpegDecoder, RejectsGarbageAndTruncatedFilesWithTheLibrarysReason) {
  std::mt19937_64 rng = fresh_rng();
  std::vector<uint8_t> garbage(300);
  for (uint8_t& b : garbage) b = static_cast<uint8_t>(rng());
  JpegHeader header;
  std::string error;
  EXPECT_FALSE(read_jpeg_header(garbage.data(), garbage.size(), &header, &error));
  EXPECT_FALSE(error.empty());
  // Cut inside the entropy-coded data: libjpeg-turbo only warns, and fills the rest with grey.
  const std::vector<uint8_t> rgb = smooth_image(256, 256, rng);
  std::vector<uint8_t> jpeg = encode_jpeg(rgb.data(), 256, 256, 90);
  jpeg.resize(jpeg.size() / 2);
  error.clear();
  ASSERT_TRUE(read_jpeg_header(jpeg.data(), jpeg.size(), &header, &error)) << error;
  DecodedImage image;
  EXPECT_FALSE(decode_jpeg(jpeg.data(), jpeg.size(), header, whole(256, 256), 256, 256, &image, &error));
  EXPECT_NE(error.find("Premature end"), std::string::npos) << error;
}

// On main at c96be46 a rejected header left the thread's decoder in a state in
// which the next good files failed too ("two SOI markers", "Bogus marker length"). Every kind of
// refused header, then a good file on the same thread: it must decode, and exactly as on a thread
// that never saw a bad file.
TEST(JpegDecoder, ARefusedHeaderDoesNotPoisonTheThreadsNextFiles) {
  std::mt19937_64 rng = fresh_rng();
  const std::vector<uint8_t> rgb = smooth_image(200, 150, rng);
  const std::vector<uint8_t> good = encode_jpeg(rgb.data(), 200, 150, 90);
  std::vector<uint8_t> garbage(300);
  for (uint8_t& b : garbage) b = static_cast<uint8_t>(rng());
  const std::vector<std::pair<const char*, std::vector<uint8_t>>> bad = {
      {"65535x65535", test::with_declared_size(good, 65535, 65535)},
      {"zero width", test::with_declared_size(good, 0, 150)},
      {"truncated header", std::vector<uint8_t>(good.begin(), good.begin() + 40)},
      {"garbage", garbage},
  };
  auto decode_good = [&](DecodedImage* image, std::string* error) {
    JpegHeader header;
    return read_jpeg_header(good.data(), good.size(), &header, error) &&
           decode_jpeg(good.data(), good.size(), header, whole(200, 150), 100, 75, image, error);
  };
  DecodedImage reference;
  std::string error;
  std::thread([&] { ASSERT_TRUE(decode_good(&reference, &error)) << error; }).join();
  ASSERT_FALSE(reference.rgbx.empty());
  std::thread([&] {
    for (const auto& [what, bytes] : bad) {
      JpegHeader header;
      std::string refusal;
      EXPECT_FALSE(read_jpeg_header(bytes.data(), bytes.size(), &header, &refusal)) << what << " was accepted";
      for (int again = 0; again < 3; ++again) {
        DecodedImage image;
        std::string why;
        ASSERT_TRUE(decode_good(&image, &why)) << "a good file after a " << what << " header: " << why;
        EXPECT_EQ(rgb_of(image), rgb_of(reference)) << "after a " << what << " header";
      }
    }
  }).join();
}

}  // namespace
}  // namespace dtrain::train
