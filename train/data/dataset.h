#pragma once
// Datasets produce one sample at a time as uint8 HWC pixels (what crosses PCIe in the GPU path;
// normalization happens after) plus an integer label. Augmentation draws from the rng it is given,
// which the loader derives from (seed, epoch, index), so a sample looks the same whichever loader
// thread produces it and on whichever rank.
// load() is called from several loader threads at once: implementations are thread-safe.
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "train/data/deferred_jpeg.h"

namespace dtrain::train {

// Files found bad and skipped (image folders); other datasets have none.
struct BadFiles {
  size_t found_by_scan = 0;             // the same on every rank
  std::vector<std::string> unreadable;  // found while decoding, on this rank
  size_t allowed = 0;                   // max_bad_fraction of the entries
};

struct ImageShape {
  int height = 0;
  int width = 0;
  int channels = 0;
  size_t bytes() const { return static_cast<size_t>(height) * width * channels; }
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::string name() const = 0;
  virtual size_t size() const = 0;
  virtual int num_classes() const = 0;
  // The shape load() writes (after cropping).
  virtual ImageShape output_shape() const = 0;
  // Writes sample `index` (HWC uint8, output_shape().bytes() bytes) and returns its label.
  virtual int32_t load(size_t index, std::mt19937_64& rng, uint8_t* out) const = 0;
  // Whether load_deferred() may leave images to the GPU (deferred_jpeg.h): JPEG folders.
  virtual bool can_defer_decoding() const { return false; }
  // load(), except that an image the GPU can decode may be left to it: its file goes into
  // deferral.arena, deferral.job describes it (pending) and `out` is not written. Sets
  // job->pending false when it wrote `out` instead. The label is returned either way.
  virtual int32_t load_deferred(size_t index, std::mt19937_64& rng, uint8_t* out, const JpegDeferral& deferral) const {
    deferral.job->pending = false;
    return load(index, rng, out);
  }
  // Per-channel mean and std of the pixels scaled to [0, 1], for normalization.
  virtual void normalization(float mean[3], float std[3]) const = 0;
  virtual BadFiles bad_files() const { return {}; }
  // A fingerprint of what the dataset lists, in order: for files, each one's name relative to the
  // dataset's directory and its label, so ranks holding the same files under different mount
  // points agree, and a file missing or added on one node shows. Ranks compare it at start.
  // 0: nothing to compare beyond size().
  virtual uint64_t listing_fingerprint() const { return 0; }
};

}  // namespace dtrain::train
