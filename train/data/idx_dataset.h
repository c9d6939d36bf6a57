#pragma once
// MNIST / Fashion-MNIST in the idx format (gzip-compressed or not), e.g. Debian's
// dataset-fashion-mnist: /usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz.
// Training augmentation: pad by `pad` pixels and take a random crop of the original size, plus a
// random horizontal flip.
#include <string>
#include <vector>

#include "train/data/dataset.h"

namespace dtrain::train {

class IdxDataset final : public Dataset {
 public:
  // Reads both files fully; UsageError naming the file on anything malformed.
  IdxDataset(const std::string& images_path, const std::string& labels_path, bool augment, int pad = 2,
             bool flip = true);

  std::string name() const override { return name_; }
  size_t size() const override { return labels_.size(); }
  int num_classes() const override { return 10; }
  ImageShape output_shape() const override { return {rows_, cols_, 1}; }
  int32_t load(size_t index, std::mt19937_64& rng, uint8_t* out) const override;
  void normalization(float mean[3], float std[3]) const override;
  // The image shape and every label (hashing the pixels too would cost a pass over all of them).
  uint64_t listing_fingerprint() const override;

 private:
  std::string name_;
  int rows_ = 0;
  int cols_ = 0;
  std::vector<uint8_t> images_;
  std::vector<uint8_t> labels_;
  bool augment_;
  int pad_;
  bool flip_;
  float mean_ = 0, std_ = 1;
};

// Reads a whole file, gunzipping when it ends in ".gz". UsageError naming the file on failure.
std::vector<uint8_t> read_maybe_gzipped(const std::string& path);

}  // namespace dtrain::train
