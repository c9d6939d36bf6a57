#pragma once
// An ImageNet-layout folder: <split_dir>/<wnid>/<image>.JPEG, class index = position of the wnid in
// sorted order (what torchvision's ImageFolder does, so labels agree with the usual tools).
//
// Bad data is counted, skipped and reported with its path, never silently trained on:
//  - found while scanning (every rank scans; rank 0 reports): a file that is not named as a JPEG,
//    an empty class folder, a stray file beside the class folders, a symlink loop or a dangling link;
//  - found while decoding (the rank that meets it reports): an unreadable or corrupt JPEG, a file
//    over max_file_bytes, a header over max_image_pixels, a progressive file with absurdly many
//    scans. The sample is replaced by the next good one, so the batch stays full and ranks stay
//    in step.
// When the bad files exceed max_bad_fraction of the entries, loading stops with an error naming
// the count, the limit and the last file. A missing directory or one without any image is a
// UsageError at construction, before training starts.
#include <cstddef>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "train/data/dataset.h"
#include "train/data/jpeg_decoder.h"

namespace dtrain::train {

struct ImageFolderOptions {
  bool train = true;  // RandomResizedCrop + flip; otherwise resize shorter side + centre crop
  int crop = 224;
  int resize = 256;  // validation: shorter side before the centre crop
  double max_bad_fraction = 0.001;
  // Hostile files are bad files: larger files, and headers declaring more pixels, are refused
  // before any decoding.
  int64_t max_file_bytes = int64_t{64} << 20;
  int64_t max_image_pixels = kDefaultMaxImagePixels;
};

class ImageFolderDataset final : public Dataset {
 public:
  ImageFolderDataset(const std::string& split_dir, ImageFolderOptions options);

  std::string name() const override { return "image folder " + dir_; }
  size_t size() const override { return files_.size(); }
  int num_classes() const override { return static_cast<int>(classes_.size()); }
  ImageShape output_shape() const override { return {options_.crop, options_.crop, 3}; }
  int32_t load(size_t index, std::mt19937_64& rng, uint8_t* out) const override;
  // Training images only: validation stays on the host (a few per cent of the images).
  bool can_defer_decoding() const override { return options_.train; }
  int32_t load_deferred(size_t index, std::mt19937_64& rng, uint8_t* out, const JpegDeferral& deferral) const override;
  void normalization(float mean[3], float std[3]) const override;  // ImageNet's

  const std::vector<std::string>& classes() const { return classes_; }
  BadFiles bad_files() const override;
  uint64_t listing_fingerprint() const override { return listing_fingerprint_; }
  // Entries the limit is a fraction of: images plus everything found bad by the scan.
  size_t entries() const { return files_.size() + scan_bad_; }

 private:
  struct File {
    std::string path;
    int32_t label;
  };
  // Decodes and crops files_[index], or (deferral not null) leaves a file the GPU can decode to
  // it; false with the reason if the file is bad.
  bool try_load(size_t index, std::mt19937_64& rng, uint8_t* out, const JpegDeferral* deferral,
                std::string* error) const;
  int32_t load_any(size_t index, std::mt19937_64& rng, uint8_t* out, const JpegDeferral* deferral) const;
  void record_bad(const std::string& path, const std::string& reason) const;

  std::string dir_;
  ImageFolderOptions options_;
  std::vector<std::string> classes_;
  std::vector<File> files_;
  size_t scan_bad_ = 0;
  uint64_t listing_fingerprint_ = 0;
  size_t allowed_bad_ = 0;
  mutable std::mutex bad_mutex_;
  mutable std::set<std::string> decode_bad_;
};

}  // namespace dtrain::train
