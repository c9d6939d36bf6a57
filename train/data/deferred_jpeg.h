#pragma once
// Training JPEGs left for the GPU to decode (jpeg_decoder gpu: nvJPEG's hardware decoder). The loader
// thread does everything but the decoding: it reads the file, checks the header, draws the crop
// and the flip from the sample's random stream exactly as a host decode would, and puts the file's
// bytes in its batch's JpegArena instead of pixels. The GPU engine decodes the batch's deferred
// images and resizes their crops into the batch on the device (cuda/device_jpeg_stage.h).
//
// Nothing is lost when the device cannot take an image: a file the hardware does not support, or
// a batch the decoder refuses, is decoded on the host after all (decode_on_host), with the same
// crop and flip, the same bad-file accounting and the same substitute for a bad file. What the
// host would catch and the device may not: a file whose header and end marker are intact but
// whose data is corrupt. libjpeg-turbo warns and the file is skipped; nvJPEG may decode it without
// an error, and it is trained on. (Truncated files, the common case, lack the end marker and stay
// on the host.)
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "runtime/memory/buffer.h"
#include "train/data/crop_geometry.h"

namespace dtrain::train {

struct DeferredJpeg {
  bool pending = false;            // this image of the batch waits for the device
  const uint8_t* bytes = nullptr;  // the whole file, in the batch's JpegArena
  size_t size = 0;
  int width = 0, height = 0;  // the image's, from its header
  CropRegion region;          // in the image's pixels
  bool flip = false;
  size_t index = 0;       // the dataset entry
  uint64_t rng_seed = 0;  // the sample's random stream (sample_seed), for a host decode
};

// Page-locked room for the compressed files of one batch. Loader threads reserve space for a file
// without a lock; a file that does not fit is decoded on the host instead.
class JpegArena {
 public:
  explicit JpegArena(size_t bytes) : memory_(runtime::MemoryKind::kPinnedHost, bytes) {}
  // `bytes` of room, or nullptr when it does not fit (a smaller file later still may).
  uint8_t* reserve(size_t bytes) {
    size_t at = used_.load(std::memory_order_relaxed);
    do {
      if (at + bytes > memory_.bytes()) return nullptr;
    } while (!used_.compare_exchange_weak(at, at + bytes, std::memory_order_relaxed));
    return static_cast<uint8_t*>(memory_.data()) + at;
  }
  void clear() { used_.store(0, std::memory_order_relaxed); }

 private:
  runtime::Buffer memory_;
  std::atomic<size_t> used_{0};
};

// Room for the deferred images of one load: where the loader thread may put the file, and the
// record it fills in.
struct JpegDeferral {
  JpegArena* arena = nullptr;
  DeferredJpeg* job = nullptr;
};

// Compressed bytes kept per image of a batch: ImageNet's training JPEGs average ~110 KiB; the
// larger ones that find the arena full are decoded on the host.
constexpr size_t kArenaBytesPerImage = size_t{160} << 10;

}  // namespace dtrain::train
