#include "train/data/synthetic_dataset.h"

#include <algorithm>
#include <cstring>

#include "runtime/base/error.h"
#include "runtime/io/fingerprint.h"

namespace dtrain::train {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finalizer: a label per index without an RNG per sample
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

SyntheticDataset::SyntheticDataset(size_t size, ImageShape shape, int num_classes, uint64_t seed)
    : size_(size), shape_(shape), classes_(num_classes), seed_(seed) {
  DTRAIN_USAGE_CHECK(size > 0 && shape.bytes() > 0 && num_classes > 0)
      << "synthetic data needs a size, a shape and classes";
  // The pixels are made here, once: load() only copies (a throughput benchmark must not measure a
  // random-number generator).
  const size_t images = std::min(size, kDistinctImages);
  pool_.resize(images * shape.bytes());
  std::mt19937_64 rng(seed_);
  for (size_t i = 0; i < pool_.size(); i += 8) {
    const uint64_t bits = rng();
    std::memcpy(&pool_[i], &bits, std::min<size_t>(8, pool_.size() - i));
  }
}

int32_t SyntheticDataset::load(size_t index, std::mt19937_64&, uint8_t* out) const {
  // The sample depends only on (seed, index): the same image and label every epoch.
  const size_t image = index % (pool_.size() / shape_.bytes());
  std::memcpy(out, pool_.data() + image * shape_.bytes(), shape_.bytes());
  return static_cast<int32_t>(mix(seed_ ^ (index * 0x9E3779B97F4A7C15ull)) % static_cast<uint64_t>(classes_));
}

uint64_t SyntheticDataset::listing_fingerprint() const {
  const uint64_t what[5] = {size_, uint64_t(shape_.height), uint64_t(shape_.width), uint64_t(classes_), seed_};
  return runtime::fingerprint(what, sizeof(what));
}

void SyntheticDataset::normalization(float mean[3], float std[3]) const {
  for (int c = 0; c < 3; ++c) {
    mean[c] = 0.5f;
    std[c] = 0.29f;  // uniform bytes
  }
}

}  // namespace dtrain::train
