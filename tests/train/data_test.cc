// Data pipeline: sharding, the idx reader (Fashion-MNIST), synthetic data and the prefetching loader.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <set>

#include "runtime/base/error.h"
#include "tests/support/test_seed.h"
#include "train/data/data_loader.h"
#include "train/data/idx_dataset.h"
#include "train/data/sharded_sampler.h"
#include "train/data/synthetic_dataset.h"

namespace dtrain::train {
namespace {

namespace fs = std::filesystem;

TEST(ShardedSampler, RanksGetEqualDisjointSharesOfOneSharedPermutation) {
  for (bool drop_last : {true, false}) {
    const size_t size = 103;
    const int world = 4;
    std::multiset<size_t> seen;
    size_t per_rank = 0;
    for (int r = 0; r < world; ++r) {
      ShardedSampler s(size, world, r, SamplerOptions{42, true, drop_last});
      const auto mine = s.indices(3);
      per_rank = mine.size();
      EXPECT_EQ(mine.size(), s.per_rank());
      seen.insert(mine.begin(), mine.end());
    }
    EXPECT_EQ(per_rank, drop_last ? 25u : 26u);
    if (drop_last) {
      EXPECT_EQ(std::set<size_t>(seen.begin(), seen.end()).size(), seen.size()) << "no sample twice";
    } else {
      EXPECT_EQ(std::set<size_t>(seen.begin(), seen.end()).size(), size) << "padding covers every sample";
    }
  }
  ShardedSampler s(1000, 2, 0, SamplerOptions{7, true, true});
  EXPECT_NE(s.indices(0), s.indices(1)) << "a new permutation every epoch";
  EXPECT_EQ(s.indices(1), ShardedSampler(1000, 2, 0, SamplerOptions{7, true, true}).indices(1)) << "deterministic";
}

// Writes a small idx pair; `gzip` compresses it.
void write_idx(const fs::path& images, const fs::path& labels, int count, int rows, int cols, bool gzip) {
  auto be = [](uint32_t v) { return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; };
  std::string image_bytes = be(0x803) + be(count) + be(rows) + be(cols);
  for (int i = 0; i < count * rows * cols; ++i) image_bytes.push_back(char(i % 251));
  std::string label_bytes = be(0x801) + be(count);
  for (int i = 0; i < count; ++i) label_bytes.push_back(char(i % 10));
  for (const auto& [path, bytes] : {std::pair{images, image_bytes}, std::pair{labels, label_bytes}}) {
    if (gzip) {
      gzFile f = gzopen(path.c_str(), "wb");
      gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
      gzclose(f);
    } else {
      std::ofstream(path, std::ios::binary) << bytes;
    }
  }
}

TEST(IdxDataset, ReadsRawAndGzippedFilesAndAugmentsDeterministically) {
  const fs::path dir = fs::temp_directory_path() / ("dtrain_idx_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (bool gzip : {false, true}) {
    const fs::path images = dir / (gzip ? "img.gz" : "img"), labels = dir / (gzip ? "lab.gz" : "lab");
    write_idx(images, labels, 12, 5, 4, gzip);
    IdxDataset plain(images, labels, false);
    EXPECT_EQ(plain.size(), 12u);
    EXPECT_EQ(plain.output_shape().height, 5);
    std::vector<uint8_t> out(20);
    std::mt19937_64 rng(1);
    EXPECT_EQ(plain.load(7, rng, out.data()), 7);
    EXPECT_EQ(out[0], uint8_t((7 * 20) % 251));
    IdxDataset augmented(images, labels, true);
    std::vector<uint8_t> a(20), b(20);
    std::mt19937_64 r1(99), r2(99);
    augmented.load(3, r1, a.data());
    augmented.load(3, r2, b.data());
    EXPECT_EQ(a, b) << "the same rng gives the same crop";
  }
  std::ofstream(dir / "bad") << "not an idx file";
  try {
    IdxDataset bad(dir / "bad", dir / "lab", false);
    FAIL() << "no error";
  } catch (const runtime::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "bad").string()), std::string::npos) << e.what();
  }
  EXPECT_THROW(IdxDataset(dir / "missing", dir / "lab", false), runtime::UsageError);
  fs::remove_all(dir);
}

TEST(IdxDataset, ReadsDebiansFashionMnist) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  if (!fs::exists(dir + "t10k-images-idx3-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  IdxDataset test(dir + "t10k-images-idx3-ubyte.gz", dir + "t10k-labels-idx1-ubyte.gz", false);
  EXPECT_EQ(test.size(), 10000u);
  EXPECT_EQ(test.output_shape().height, 28);
  float mean[3], std[3];
  test.normalization(mean, std);
  EXPECT_NEAR(mean[0], 0.286, 0.01);  // Fashion-MNIST's known pixel mean
}

TEST(DataLoader, DeliversEveryBatchInSamplerOrderWhateverTheThreads) {
  SyntheticDataset data(203, ImageShape{4, 3, 2}, 5, 11);
  ShardedSampler sampler(data.size(), 2, 1, SamplerOptions{5, true, true});
  std::vector<std::vector<int32_t>> runs;
  for (int threads : {1, 3}) {
    DataLoader loader(data, sampler, LoaderOptions{8, threads, 3, 9});
    EXPECT_EQ(loader.batches_per_epoch(), 101u / 8u);
    for (int epoch = 0; epoch < 2; ++epoch) {
      loader.start_epoch(epoch);
      std::vector<int32_t> labels;
      const auto indices = sampler.indices(epoch);
      size_t batch_number = 0;
      while (const Batch* b = loader.next()) {
        for (int i = 0; i < b->size; ++i) {
          std::mt19937_64 unused;
          std::vector<uint8_t> expected(24);
          const int32_t label = data.load(indices[batch_number * 8 + size_t(i)], unused, expected.data());
          EXPECT_EQ(b->labels[size_t(i)], label);
          EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(b->pixels.data()) + size_t(i) * 24, expected.data(), 24),
                    0);
          labels.push_back(b->labels[size_t(i)]);
        }
        ++batch_number;
      }
      EXPECT_EQ(batch_number, loader.batches_per_epoch());
      runs.push_back(labels);
    }
  }
  EXPECT_EQ(runs[0], runs[2]);
  EXPECT_EQ(runs[1], runs[3]);
}

// A dataset whose label is the sample's index, to see which samples a loader delivered.
class IndexDataset final : public Dataset {
 public:
  explicit IndexDataset(size_t size) : size_(size) {}
  std::string name() const override { return "index"; }
  size_t size() const override { return size_; }
  int num_classes() const override { return static_cast<int>(size_); }
  ImageShape output_shape() const override { return {1, 1, 1}; }
  int32_t load(size_t index, std::mt19937_64&, uint8_t* out) const override {
    *out = 0;
    return static_cast<int32_t>(index);
  }
  void normalization(float mean[3], float std[3]) const override {
    std::fill(mean, mean + 3, 0.0f);
    std::fill(std, std + 3, 1.0f);
  }

 private:
  size_t size_;
};

// The samples that `world` loaders (batch `batch`) deliver in steps [first_step, last_step) of
// `epoch`, resumed from entry `first_entry` of the epoch's list (0: not re-dealt).
std::vector<int32_t> delivered(const Dataset& data, int world, int batch, int epoch, long first_step, long last_step,
                               size_t first_entry) {
  std::vector<int32_t> seen;
  for (int r = 0; r < world; ++r) {
    ShardedSampler sampler(data.size(), world, r, SamplerOptions{17, true, true});
    DataLoader loader(data, sampler, LoaderOptions{batch, 2, 3, 9});
    loader.start_epoch(epoch, static_cast<size_t>(first_step), first_entry);
    for (long step = first_step; step < last_step; ++step) {
      const Batch* b = loader.next();
      EXPECT_NE(b, nullptr) << "rank " << r << " step " << step;
      if (b == nullptr) break;
      seen.insert(seen.end(), b->labels.begin(), b->labels.begin() + b->size);
    }
  }
  return seen;
}

// The first k steps of an epoch cover the first k x batch x world entries of its
// shuffled list, so a resume on another world size or batch deals the rest over its ranks and the
// epoch sees every sample exactly once: 2 ranks x 4 for 3 steps (24), then 1 rank x 5 (the other
// 40, 8 steps); 1 rank x 3 for 7 steps (21 of 61), then 2 ranks x 2 (40, 10 steps); and a resume
// that lands on a step boundary (24 seen, 1 rank x 8) deals nothing again.
TEST(ShardedSampler, AResumeOnAnotherGeometrySeesEveryEntryOfTheEpochOnce) {
  struct Case {
    size_t size;
    int world_before, batch_before;
    long steps_before;
    int world_after, batch_after;
    long first_step_after, last_step_after;
    size_t first_entry;
  };
  for (const Case& c :
       {Case{64, 2, 4, 3, 1, 5, 4, 12, 24}, Case{61, 1, 3, 7, 2, 2, 5, 15, 21}, Case{64, 2, 4, 3, 1, 8, 3, 8, 0}}) {
    const IndexDataset data(c.size);
    for (int epoch : {0, 3}) {
      std::vector<int32_t> seen = delivered(data, c.world_before, c.batch_before, epoch, 0, c.steps_before, 0);
      ASSERT_EQ(seen.size(), static_cast<size_t>(c.steps_before * c.world_before * c.batch_before));
      const std::vector<int32_t> rest =
          delivered(data, c.world_after, c.batch_after, epoch, c.first_step_after, c.last_step_after, c.first_entry);
      seen.insert(seen.end(), rest.begin(), rest.end());
      std::sort(seen.begin(), seen.end());
      std::vector<int32_t> every(c.size);
      std::iota(every.begin(), every.end(), 0);
      EXPECT_EQ(seen, every) << c.size << " samples, " << c.world_before << "x" << c.batch_before << " -> "
                             << c.world_after << "x" << c.batch_after << ", epoch " << epoch;
    }
  }
}

// Retaining every batch the loader has would leave the workers nothing to fill: an error, not a hang.
TEST(DataLoader, RetainingEverySlotIsAnErrorNotAHang) {
  SyntheticDataset data(64, ImageShape{4, 3, 2}, 5, 11);
  ShardedSampler sampler(data.size(), 1, 0, SamplerOptions{5, true, true});
  DataLoader loader(data, sampler, LoaderOptions{4, 2, 2, 9});
  loader.start_epoch(0);
  const Batch* a = loader.next();
  loader.retain(a);
  const Batch* b = loader.next();
  loader.retain(b);
  EXPECT_THROW(loader.next(), runtime::Error);
  loader.release(a);
  loader.release(b);
  EXPECT_THROW(loader.release(b), runtime::Error);  // not retained any more
}

// A dataset that fails on one sample, as a loader thread meets a bad file past the limit.
class FailingDataset final : public Dataset {
 public:
  std::string name() const override { return "failing"; }
  size_t size() const override { return 100; }
  int num_classes() const override { return 2; }
  ImageShape output_shape() const override { return {2, 2, 1}; }
  int32_t load(size_t index, std::mt19937_64&, uint8_t* out) const override {
    DTRAIN_CHECK(index != 37) << "cannot decode /data/bad_37.JPEG";
    std::memset(out, 1, 4);
    return 0;
  }
  void normalization(float mean[3], float std[3]) const override {
    for (int c = 0; c < 3; ++c) mean[c] = 0, std[c] = 1;
  }
};

TEST(DataLoader, AWorkersErrorReachesTheConsumerWithTheFile) {
  FailingDataset data;
  ShardedSampler sampler(data.size(), 1, 0, SamplerOptions{5, false, false});
  for (int threads : {1, 4}) {
    DataLoader loader(data, sampler, LoaderOptions{8, threads, 3, 1});
    loader.start_epoch(0);
    try {
      while (loader.next() != nullptr) {
      }
      FAIL() << "no error";
    } catch (const runtime::Error& e) {
      EXPECT_NE(std::string(e.what()).find("bad_37.JPEG"), std::string::npos) << e.what();
    }
  }
}

TEST(DataLoader, NormalizesToEitherLayoutAgainstFloat64) {
  std::mt19937_64 rng(dtrain::test::random_seed());
  const ImageShape shape{3, 5, 3};
  const int batch = 2;
  std::vector<uint8_t> pixels(batch * shape.bytes());
  for (uint8_t& p : pixels) p = static_cast<uint8_t>(rng() & 255);
  const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
  std::vector<float> nchw(pixels.size()), nhwc(pixels.size());
  normalize_batch(pixels.data(), batch, shape, mean, std, PixelLayout::kNchw, nchw.data());
  normalize_batch(pixels.data(), batch, shape, mean, std, PixelLayout::kNhwc, nhwc.data());
  for (int n = 0; n < batch; ++n) {
    for (int y = 0; y < shape.height; ++y) {
      for (int x = 0; x < shape.width; ++x) {
        for (int c = 0; c < 3; ++c) {
          const size_t hwc = ((static_cast<size_t>(n) * shape.height + y) * shape.width + x) * 3 + c;
          const size_t chw = ((static_cast<size_t>(n) * 3 + c) * shape.height + y) * shape.width + x;
          const double want = (pixels[hwc] / 255.0 - mean[c]) / std[c];
          EXPECT_NEAR(nhwc[hwc], want, 1e-5 * (1 + std::fabs(want)));
          EXPECT_NEAR(nchw[chw], want, 1e-5 * (1 + std::fabs(want)));
        }
      }
    }
  }
}

}  // namespace
}  // namespace dtrain::train
