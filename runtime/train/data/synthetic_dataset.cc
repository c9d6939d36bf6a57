#include "runtime/train/data/synthetic_dataset.h"

#include "runtime/core/error.h"

namespace dtrain::train {

SyntheticDataset::SyntheticDataset(size_t size, ImageShape shape, int num_classes, uint64_t seed)
    : size_(size), shape_(shape), classes_(num_classes), seed_(seed) {
  DTRAIN_USAGE_CHECK(size > 0 && shape.bytes() > 0 && num_classes > 0) << "synthetic data needs a size, a shape and classes";
}

int32_t SyntheticDataset::load(size_t index, std::mt19937_64&, uint8_t* out) const {
  // The sample depends only on (seed, index): the same image and label every epoch.
  std::mt19937_64 rng(seed_ ^ (index * 0x9E3779B97F4A7C15ull));
  for (size_t i = 0; i < shape_.bytes(); i += 8) {
    const uint64_t bits = rng();
    for (size_t b = 0; b < 8 && i + b < shape_.bytes(); ++b) out[i + b] = static_cast<uint8_t>(bits >> (8 * b));
  }
  return static_cast<int32_t>(rng() % static_cast<uint64_t>(classes_));
}

void SyntheticDataset::normalization(float mean[3], float std[3]) const {
  for (int c = 0; c < 3; ++c) {
    mean[c] = 0.5f;
    std[c] = 0.29f;  // uniform bytes
  }
}

}  // namespace dtrain::train
