#pragma once
// Photo-like JPEGs for loader tests and benchmarks, standing in for ImageNet where it is not at hand.
//
// What makes them "realistic" is what a JPEG loader's cost depends on, not what they show:
//  - sizes like ImageNet's: shorter side 200-800, most files 500 px on the long side, landscape 4:3
//    first, some 3:2, 16:9, portrait and square;
//  - content that compresses like photos (30-150 KiB, ~110 KiB at 500x375): a smooth low-frequency
//    colour field, a few objects with hard edges, mid-frequency texture whose strength varies over
//    the image, and mild sensor noise. Per-pixel white noise would compress far worse than photos and
//    decode differently (every AC coefficient busy), so it is only the smallest part;
//  - encoder settings like the wild: quality 75-95, mostly 4:2:0, some 4:4:4, ~1% greyscale and
//    ~1% CMYK (TurboJPEG writes CMYK as YCCK, Adobe-inverted, as Photoshop does).
// Each class has its own hues, object shape and stripe orientation and period, so a model can learn
// the classes. Every image depends only on (seed, split, label, index): the tree is the same
// whichever thread writes which file.
//
// The detail layer (texture + noise) is scaled until the file lands near a size drawn for it, so
// file sizes follow the intended distribution at every quality and image size; that costs 2-3
// encodes per image. In the rare case the search cannot reach 30-150 KiB, the quality moves.
#include <cstdint>
#include <memory>
#include <vector>

namespace dtrain::test {

enum class JpegColour { kRgb, kGrey, kCmyk };

struct RealisticJpeg {
  std::vector<uint8_t> bytes;
  int width = 0;
  int height = 0;
  int quality = 0;
  JpegColour colour = JpegColour::kRgb;
  bool subsampling_444 = false;  // otherwise 4:2:0 (or grey)
  int encodes = 0;               // tries the size search took
  bool quality_moved = false;    // outside the drawn quality, to keep the size in 30-150 KiB (rare)
};

// The JPEG encoder of one thread (a TurboJPEG compressor and its output buffer, reused).
class JpegWriter {
 public:
  JpegWriter();
  ~JpegWriter();
  JpegWriter(const JpegWriter&) = delete;
  JpegWriter& operator=(const JpegWriter&) = delete;

  // pixel_format / subsampling: TurboJPEG's TJPF_* / TJSAMP_*. The result is valid until the next call.
  const std::vector<uint8_t>& encode(const uint8_t* pixels, int width, int height, int pixel_format, int subsampling,
                                     int quality);

 private:
  void* handle_ = nullptr;
  unsigned char* buffer_ = nullptr;
  unsigned long buffer_size_ = 0;
  std::vector<uint8_t> out_;
};

// Image `index` of class `label` (0-based; labels < 1000) in `split` (0 train, 1 val).
RealisticJpeg make_realistic_jpeg(uint64_t seed, int split, int label, int index, JpegWriter& writer);

}  // namespace dtrain::test
