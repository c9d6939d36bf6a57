#pragma once
// Random images of a fixed shape with fixed random labels, for throughput benchmarks (as
// tf_cnn_benchmarks' synthetic data): no decoding cost, deterministic for a seed. The pixels of
// kDistinctImages images are made once at construction; sample i is image i mod that.
#include <vector>

#include "train/data/dataset.h"

namespace dtrain::train {

class SyntheticDataset final : public Dataset {
 public:
  static constexpr size_t kDistinctImages = 64;

  SyntheticDataset(size_t size, ImageShape shape, int num_classes, uint64_t seed);
  std::string name() const override { return "synthetic"; }
  size_t size() const override { return size_; }
  int num_classes() const override { return classes_; }
  ImageShape output_shape() const override { return shape_; }
  int32_t load(size_t index, std::mt19937_64& rng, uint8_t* out) const override;
  void normalization(float mean[3], float std[3]) const override;
  uint64_t listing_fingerprint() const override;

 private:
  size_t size_;
  ImageShape shape_;
  int classes_;
  uint64_t seed_;
  std::vector<uint8_t> pool_;
};

}  // namespace dtrain::train
