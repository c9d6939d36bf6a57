// The ImageNet-layout folder dataset on a generated tree of real JPEGs: class order, transforms,
// and every kind of bad data (corrupt JPEG, non-image, empty class folder, missing directory,
// hostile files), and the parallel loader against a single-threaded reference.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <random>
#include <set>
#include <tuple>

#include "runtime/base/error.h"
#include "tests/support/hostile_jpegs.h"
#include "tests/support/image_tree.h"
#include "train/data/data_loader.h"
#include "train/data/image_folder_dataset.h"
#include "train/data/sharded_sampler.h"

namespace dtrain::train {
namespace {
namespace fs = std::filesystem;

class ImageFolder : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("dtrain_image_folder_" + std::to_string(getpid()));
    test::write_image_tree(root_.string(), test::ImageTreeSpec{});  // 3 classes x 6, plus bad files
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string split(const char* name) const { return (root_ / name).string(); }
  fs::path root_;
};

ImageFolderOptions lenient(bool train) {
  return {train, 32, 36, 0.2};
}

TEST_F(ImageFolder, ClassesInSortedOrderAndBadEntriesCountedByTheScan) {
  const ImageFolderDataset data(split("train"), lenient(true));
  EXPECT_EQ(data.classes(), (std::vector<std::string>{"class_a", "class_b", "class_c", "class_d"}));
  EXPECT_EQ(data.size(), 19u);                    // 18 images + broken.JPEG, which only decoding finds out
  EXPECT_EQ(data.bad_files().found_by_scan, 2u);  // notes.txt and the empty class_d
  EXPECT_EQ(data.output_shape().bytes(), 32u * 32 * 3);
}

// jpeg_decoder gpu: a deferring loader leaves training JPEGs to the device with the crop and flip
// a host decode would use; decode_on_host (the device's fallback) then gives the non-deferring
// loader's pixels and labels exactly, broken.JPEG's substitute included.
TEST_F(ImageFolder, DeferredImagesDecodeOnTheHostAsTheLoaderWould) {
  const ImageFolderDataset data(split("train"), lenient(true));
  ASSERT_TRUE(data.can_defer_decoding());
  EXPECT_FALSE(ImageFolderDataset(split("val"), lenient(false)).can_defer_decoding()) << "validation stays on the host";
  const ShardedSampler sampler(data.size(), 1, 0, SamplerOptions{11, true, true, true});
  LoaderOptions options{4, 3, 2, 11, false};
  DataLoader reference(data, sampler, options);
  options.defer_decoding = true;
  DataLoader deferring(data, sampler, options);
  const size_t bytes = data.output_shape().bytes();
  std::vector<uint8_t> decoded(bytes);
  int pending = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    reference.start_epoch(epoch);
    deferring.start_epoch(epoch);
    for (size_t b = 0; b < reference.batches_per_epoch(); ++b) {
      const Batch* want = reference.next();
      const Batch* got = deferring.next();
      ASSERT_TRUE(want && got);
      ASSERT_EQ(got->labels, want->labels) << "epoch " << epoch << " batch " << b;
      for (int p = 0; p < got->size; ++p) {
        const auto* expected = static_cast<const uint8_t*>(want->pixels.data()) + p * bytes;
        const DeferredJpeg& job = got->deferred[static_cast<size_t>(p)];
        const uint8_t* actual = static_cast<const uint8_t*>(got->pixels.data()) + p * bytes;
        if (job.pending) {
          ++pending;
          EXPECT_GT(job.size, 0u);
          EXPECT_TRUE(job.region.x >= 0 && job.region.x + job.region.width <= job.width + 1e-6 && job.region.y >= 0 &&
                      job.region.y + job.region.height <= job.height + 1e-6);
          EXPECT_EQ(decode_on_host(*got, p, decoded.data()), want->labels[static_cast<size_t>(p)]);
          actual = decoded.data();
        }
        ASSERT_TRUE(std::equal(actual, actual + bytes, expected))
            << "epoch " << epoch << " batch " << b << " image " << p << (job.pending ? " (deferred)" : "");
      }
    }
  }
  EXPECT_GT(pending, 20) << "the tree's files are baseline 4:2:0: most are left to the device";
}

TEST_F(ImageFolder, CorruptJpegIsSkippedForTheNextImageAndCounted) {
  const ImageFolderDataset data(split("train"), lenient(true));
  std::vector<uint8_t> out(data.output_shape().bytes());
  std::set<int> labels;
  for (size_t i = 0; i < data.size(); ++i) {
    std::mt19937_64 rng(i);
    labels.insert(data.load(i, rng, out.data()));
  }
  EXPECT_EQ(labels, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(data.bad_files().unreadable, std::vector<std::string>{split("train") + "/class_b/broken.JPEG"});
}

TEST_F(ImageFolder, ValidationCropIsDeterministicAndTrainingCropsVary) {
  const ImageFolderDataset val(split("val"), lenient(false));
  const ImageFolderDataset train(split("train"), lenient(true));
  std::vector<uint8_t> a(val.output_shape().bytes()), b(a.size());
  std::mt19937_64 r1(1), r2(2);
  val.load(0, r1, a.data());
  val.load(0, r2, b.data());
  EXPECT_EQ(a, b);
  train.load(0, r1, a.data());
  train.load(0, r2, b.data());
  EXPECT_NE(a, b);
}

TEST_F(ImageFolder, ClassColourSurvivesDecodeCropAndResize) {
  const ImageFolderDataset val(split("val"), lenient(false));
  std::vector<uint8_t> out(val.output_shape().bytes());
  std::mt19937_64 rng(0);
  for (size_t i = 0; i < val.size(); ++i) {
    const int label = val.load(i, rng, out.data());
    double mean[3] = {0, 0, 0};
    for (size_t p = 0; p < out.size(); ++p) mean[p % 3] += out[p] / (out.size() / 3.0);
    // class_a is red, class_b green, class_c blue (tests/support/image_tree.h).
    const int brightest = static_cast<int>(std::max_element(mean, mean + 3) - mean);
    EXPECT_EQ(brightest, label) << "val image " << i;
  }
}

TEST_F(ImageFolder, ScanFindingsBeyondTheLimitAreAnErrorBeforeTraining) {
  ImageFolderOptions strict = lenient(true);
  strict.max_bad_fraction = 0.001;
  try {
    ImageFolderDataset data(split("train"), strict);
    FAIL() << "no error";
  } catch (const runtime::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("2 of 21 entries are bad"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("max_bad_fraction 0.001"), std::string::npos) << e.what();
  }
}

TEST_F(ImageFolder, DecodeFindingsBeyondTheLimitStopLoadingNamingTheFile) {
  ImageFolderOptions options = lenient(true);
  options.max_bad_fraction = 0.1;  // 21 entries: 2 allowed, both used by the scan
  const ImageFolderDataset data(split("train"), options);
  std::vector<uint8_t> out(data.output_shape().bytes());
  try {
    for (size_t i = 0; i < data.size(); ++i) {
      std::mt19937_64 rng(i);
      data.load(i, rng, out.data());
    }
    FAIL() << "no error";
  } catch (const runtime::Error& e) {
    EXPECT_NE(std::string(e.what()).find("broken.JPEG"), std::string::npos) << e.what();
  }
}

TEST_F(ImageFolder, MissingOrEmptyDirectoryIsAUsageError) {
  EXPECT_THROW(ImageFolderDataset((root_ / "nope").string(), lenient(true)), runtime::UsageError);
  fs::create_directories(root_ / "empty");
  try {
    ImageFolderDataset data((root_ / "empty").string(), lenient(true));
    FAIL() << "no error";
  } catch (const runtime::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("holds no images"), std::string::npos) << e.what();
  }
}

// Symlink loops (a file that points at itself, two that point at each other, a class folder that
// points at itself) are bad entries, skipped, counted and named in the log; before, the scan died
// of a raw filesystem_error ("Too many levels of symbolic links") on every rank.
TEST_F(ImageFolder, SymlinkLoopsAreSkippedAndCountedAsBadEntries) {
  const fs::path train = root_ / "train";
  fs::create_symlink("self.JPEG", train / "class_a" / "self.JPEG");
  fs::create_symlink("pong.JPEG", train / "class_b" / "ping.JPEG");
  fs::create_symlink("ping.JPEG", train / "class_b" / "pong.JPEG");
  fs::create_symlink("class_loop", train / "class_loop");
  ImageFolderOptions options = lenient(true);
  options.max_bad_fraction = 0.3;  // 6 bad of 25 entries
  testing::internal::CaptureStderr();
  std::unique_ptr<ImageFolderDataset> data;
  EXPECT_NO_THROW(data = std::make_unique<ImageFolderDataset>(train.string(), options));
  const std::string log = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(data);
  EXPECT_EQ(data->size(), 19u);                        // the same images as without the loops
  EXPECT_EQ(data->bad_files().found_by_scan, 2u + 4);  // notes.txt, the empty class_d, 4 loops
  EXPECT_EQ(data->classes().size(), 4u);               // class_loop is no class
  for (const char* name : {"class_a/self.JPEG", "class_b/ping.JPEG", "class_b/pong.JPEG", "class_loop"}) {
    EXPECT_NE(log.find("skipping " + (train / name).string() + ": "), std::string::npos) << name << "\n" << log;
  }
  EXPECT_NE(log.find("symbolic links"), std::string::npos) << log;
}

TEST_F(ImageFolder, LoaderThreadsDeliverFullBatches) {
  const ImageFolderDataset data(split("train"), lenient(true));
  const ShardedSampler sampler(data.size(), 1, 0, SamplerOptions{3, true, true, true});
  DataLoader loader(data, sampler, LoaderOptions{4, 3, 2, 3, false});
  loader.start_epoch(0);
  int batches = 0;
  while (const Batch* b = loader.next()) {
    EXPECT_EQ(b->size, 4);
    for (int32_t label : b->labels) EXPECT_TRUE(label >= 0 && label < 3);
    ++batches;
  }
  EXPECT_EQ(batches, 4);
}

// The parallel loader's batches are exactly what one thread calling the dataset in sampler order
// makes, whatever the thread count, prefetch depth and batches the consumer retains.
TEST(ImageFolderLoader, ParallelBatchesEqualASingleThreadedReference) {
  const fs::path root = fs::temp_directory_path() / ("dtrain_parallel_loader_" + std::to_string(getpid()));
  test::ImageTreeSpec spec;
  spec.classes = 4;
  spec.train_per_class = 23;
  spec.plant_bad_files = false;
  test::write_image_tree(root.string(), spec);
  const ImageFolderDataset data((root / "train").string(), lenient(true));
  const ShardedSampler sampler(data.size(), 1, 0, SamplerOptions{17, true, true, true});
  const int batch = 5;
  const size_t bytes = data.output_shape().bytes();
  for (int epoch = 0; epoch < 2; ++epoch) {
    const std::vector<size_t> indices = sampler.indices(epoch);
    std::vector<uint8_t> reference(indices.size() / batch * batch * bytes);
    std::vector<int32_t> reference_labels(indices.size() / batch * batch);
    for (size_t i = 0; i < reference_labels.size(); ++i) {
      std::mt19937_64 rng = sample_rng(29, epoch, indices[i]);
      reference_labels[i] = data.load(indices[i], rng, reference.data() + i * bytes);
    }
    for (const auto& [threads, prefetch, retained] : {std::tuple{1, 2, 0}, std::tuple{7, 3, 1}, std::tuple{4, 5, 3}}) {
      DataLoader loader(data, sampler, LoaderOptions{batch, threads, prefetch, 29, false});
      loader.start_epoch(epoch);
      std::deque<const Batch*> held;
      size_t n = 0;
      while (const Batch* b = loader.next()) {
        ASSERT_EQ(b->size, batch);
        EXPECT_EQ(std::memcmp(b->pixels.data(), reference.data() + n * batch * bytes, batch * bytes), 0)
            << "batch " << n << " with " << threads << " threads";
        EXPECT_TRUE(
            std::equal(b->labels.begin(), b->labels.end(), reference_labels.begin() + static_cast<long>(n * batch)));
        if (retained > 0) {
          loader.retain(b);
          held.push_back(b);
          if (static_cast<int>(held.size()) > retained) {
            // A retained batch is untouched while the loader works ahead.
            const size_t number = n - held.size() + 1;
            EXPECT_EQ(
                std::memcmp(held.front()->pixels.data(), reference.data() + number * batch * bytes, batch * bytes), 0);
            loader.release(held.front());
            held.pop_front();
          }
        }
        ++n;
      }
      for (const Batch* b : held) loader.release(b);
      EXPECT_EQ(n, loader.batches_per_epoch());
    }
  }
  fs::remove_all(root);
}

// A file over the size cap, a header declaring 60000x60000 pixels and a progressive file with 704
// scans are refused before (or instead of) decoding, each named and counted as a bad file.
TEST_F(ImageFolder, HostileFilesAreRefusedAndCounted) {
  const fs::path dir = root_ / "train" / "class_a";
  std::mt19937 rng(5);
  const std::vector<uint8_t> rgb = test::class_image(0, 64, 48, rng);
  const std::vector<uint8_t> small = encode_jpeg(rgb.data(), 64, 48, 90);
  test::write_bytes(dir / "bomb.JPEG", test::with_declared_size(small, 60000, 60000));
  std::vector<uint8_t> padded = small;
  padded.resize(small.size() + (1 << 20), 0);  // decodes fine (trailing bytes are ignored) but is too big
  test::write_bytes(dir / "huge_file.JPEG", padded);
  test::write_bytes(dir / "scans.JPEG", test::many_scan_progressive_jpeg(64, 48));
  ImageFolderOptions options = lenient(true);
  options.max_bad_fraction = 0.5;
  options.max_file_bytes = 512 << 10;
  const ImageFolderDataset data(split("train"), options);
  std::vector<uint8_t> out(data.output_shape().bytes());
  for (size_t i = 0; i < data.size(); ++i) {
    std::mt19937_64 r(i);
    data.load(i, r, out.data());
  }
  const std::vector<std::string> bad = data.bad_files().unreadable;
  for (const char* name : {"bomb.JPEG", "huge_file.JPEG", "scans.JPEG"}) {
    EXPECT_NE(std::find(bad.begin(), bad.end(), (dir / name).string()), bad.end()) << name << " was not refused";
  }
  // Each refusal says why.
  std::string error;
  JpegHeader header;
  const std::vector<uint8_t> bomb = test::with_declared_size(small, 60000, 60000);
  EXPECT_FALSE(read_jpeg_header(bomb.data(), bomb.size(), &header, &error));
  EXPECT_NE(error.find("over the cap"), std::string::npos) << error;
  const std::vector<uint8_t> scans = test::many_scan_progressive_jpeg(64, 48);
  ASSERT_TRUE(read_jpeg_header(scans.data(), scans.size(), &header, &error)) << error;
  DecodedImage image;
  EXPECT_FALSE(decode_jpeg(scans.data(), scans.size(), header, CropRegion{0, 0, 64, 48}, 32, 32, &image, &error));
  EXPECT_NE(error.find("scans"), std::string::npos) << error;
}

}  // namespace
}  // namespace dtrain::train
