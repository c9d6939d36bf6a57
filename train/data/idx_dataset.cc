#include "train/data/idx_dataset.h"

#include <zlib.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "runtime/base/error.h"
#include "runtime/io/fingerprint.h"

namespace dtrain::train {
namespace {

uint32_t big_endian(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

}  // namespace

std::vector<uint8_t> read_maybe_gzipped(const std::string& path) {
  std::vector<uint8_t> data;
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    gzFile file = gzopen(path.c_str(), "rb");
    DTRAIN_USAGE_CHECK(file != nullptr) << "cannot open " << path << ": " << std::strerror(errno);
    uint8_t chunk[1 << 16];
    int got = 0;
    while ((got = gzread(file, chunk, sizeof(chunk))) > 0) data.insert(data.end(), chunk, chunk + got);
    int code = Z_OK;
    const std::string message = got < 0 ? gzerror(file, &code) : "";
    gzclose(file);
    DTRAIN_USAGE_CHECK(got == 0) << path << ": gzip error: " << message;
    return data;
  }
  std::ifstream in(path, std::ios::binary);
  DTRAIN_USAGE_CHECK(in.good()) << "cannot open " << path << ": " << std::strerror(errno);
  data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return data;
}

IdxDataset::IdxDataset(const std::string& images_path, const std::string& labels_path, bool augment, int pad, bool flip)
    : name_(images_path), augment_(augment), pad_(pad), flip_(flip) {
  const std::vector<uint8_t> images = read_maybe_gzipped(images_path);
  const std::vector<uint8_t> labels = read_maybe_gzipped(labels_path);
  DTRAIN_USAGE_CHECK(images.size() >= 16 && big_endian(images.data()) == 0x803)
      << images_path << ": not an idx3 image file (magic number 0x00000803 expected)";
  DTRAIN_USAGE_CHECK(labels.size() >= 8 && big_endian(labels.data()) == 0x801)
      << labels_path << ": not an idx1 label file (magic number 0x00000801 expected)";
  const uint64_t count = big_endian(images.data() + 4);
  const uint64_t rows = big_endian(images.data() + 8);
  const uint64_t cols = big_endian(images.data() + 12);
  // Zero or absurd dimensions are refused before any arithmetic on them can wrap around.
  constexpr uint64_t kMaxSide = 1 << 16;
  DTRAIN_USAGE_CHECK(count > 0 && rows > 0 && cols > 0 && rows <= kMaxSide && cols <= kMaxSide)
      << images_path << ": header says " << count << " images of " << rows << "x" << cols
      << " (each dimension must be 1 to " << kMaxSide << ", the count positive)";
  const uint64_t pixels = rows * cols;
  const uint64_t pixel_bytes = images.size() - 16;
  DTRAIN_USAGE_CHECK(count <= pixel_bytes / pixels && pixel_bytes == count * pixels)
      << images_path << ": header says " << count << " images of " << rows << "x" << cols << " but the file holds "
      << pixel_bytes << " pixel bytes";
  rows_ = static_cast<int>(rows);
  cols_ = static_cast<int>(cols);
  DTRAIN_USAGE_CHECK(big_endian(labels.data() + 4) == count && labels.size() == 8 + count)
      << labels_path << ": " << big_endian(labels.data() + 4) << " labels for " << count << " images";
  images_.assign(images.begin() + 16, images.end());
  labels_.assign(labels.begin() + 8, labels.end());
  for (size_t i = 0; i < labels_.size(); ++i) {
    DTRAIN_USAGE_CHECK(labels_[i] < 10) << labels_path << ": label " << int{labels_[i]} << " at " << i << " is not 0-9";
  }
  double sum = 0, sq = 0;
  for (uint8_t p : images_) {
    sum += p / 255.0;
    sq += (p / 255.0) * (p / 255.0);
  }
  mean_ = static_cast<float>(sum / images_.size());
  std_ = static_cast<float>(std::sqrt(sq / images_.size() - double(mean_) * mean_));
}

int32_t IdxDataset::load(size_t index, std::mt19937_64& rng, uint8_t* out) const {
  DTRAIN_CHECK(index < size()) << "sample " << index << " of " << size();
  const uint8_t* src = images_.data() + index * static_cast<size_t>(rows_) * cols_;
  if (!augment_) {
    std::memcpy(out, src, static_cast<size_t>(rows_) * cols_);
    return labels_[index];
  }
  // Pad with zeros, take a random rows x cols window, flip half the time.
  const int dy = static_cast<int>(rng() % static_cast<uint64_t>(2 * pad_ + 1)) - pad_;
  const int dx = static_cast<int>(rng() % static_cast<uint64_t>(2 * pad_ + 1)) - pad_;
  const bool mirror = flip_ && (rng() & 1);
  for (int y = 0; y < rows_; ++y) {
    for (int x = 0; x < cols_; ++x) {
      const int sy = y + dy;
      const int sx_unflipped = x + dx;
      const int sx = mirror ? cols_ - 1 - sx_unflipped : sx_unflipped;
      const bool inside = sy >= 0 && sy < rows_ && sx >= 0 && sx < cols_;
      out[y * cols_ + x] = inside ? src[sy * cols_ + sx] : 0;
    }
  }
  return labels_[index];
}

uint64_t IdxDataset::listing_fingerprint() const {
  const int shape[2] = {rows_, cols_};
  return runtime::fingerprint(labels_.data(), labels_.size(), runtime::fingerprint(shape, sizeof(shape)));
}

void IdxDataset::normalization(float mean[3], float std[3]) const {
  for (int c = 0; c < 3; ++c) {
    mean[c] = mean_;
    std[c] = std_;
  }
}

}  // namespace dtrain::train
