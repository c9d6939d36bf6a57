// The listing fingerprints ranks compare at start: the same files under another
// root agree; one file missing, added, renamed or moved to another class does not.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/support/image_tree.h"
#include "train/data/image_folder_dataset.h"
#include "train/data/synthetic_dataset.h"

namespace dtrain::train {
namespace {
namespace fs = std::filesystem;

class DatasetListing : public testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / ("dtrain_listing_" + std::to_string(getpid()));
    test::write_image_tree((base_ / "a").string(), test::ImageTreeSpec{3, 6, 2, false});
    fs::copy(base_ / "a", base_ / "b", fs::copy_options::recursive);
  }
  void TearDown() override { fs::remove_all(base_); }
  uint64_t listing(const char* root) const {
    return ImageFolderDataset((base_ / root / "train").string(), ImageFolderOptions{true, 32, 36, 0.2})
        .listing_fingerprint();
  }
  fs::path base_;
};

TEST_F(DatasetListing, SameFilesUnderAnotherRootAgree) {
  EXPECT_NE(listing("a"), 0u);
  EXPECT_EQ(listing("a"), listing("b"));
}

TEST_F(DatasetListing, OneFileMissingAddedRenamedOrMovedDiffers) {
  const uint64_t original = listing("a");
  const fs::path first = fs::directory_iterator(base_ / "b/train/class_a")->path();
  const fs::path copy = base_ / "b/train/class_a/extra.JPEG";
  fs::copy_file(first, copy);
  EXPECT_NE(listing("b"), original) << "added";
  fs::rename(copy, base_ / "b/train/class_b/extra.JPEG");
  EXPECT_NE(listing("b"), original) << "moved";
  fs::remove(base_ / "b/train/class_b/extra.JPEG");
  EXPECT_EQ(listing("b"), original);
  fs::rename(first, first.string() + ".renamed.JPEG");
  EXPECT_NE(listing("b"), original) << "renamed";
  fs::remove(first.string() + ".renamed.JPEG");
  EXPECT_NE(listing("b"), original) << "missing";
}

TEST(SyntheticListing, DependsOnSizeShapeAndSeed) {
  const ImageShape shape{8, 8, 3};
  const uint64_t base = SyntheticDataset(64, shape, 10, 1).listing_fingerprint();
  EXPECT_EQ(SyntheticDataset(64, shape, 10, 1).listing_fingerprint(), base);
  EXPECT_NE(SyntheticDataset(63, shape, 10, 1).listing_fingerprint(), base);
  EXPECT_NE(SyntheticDataset(64, shape, 10, 2).listing_fingerprint(), base);
}

}  // namespace
}  // namespace dtrain::train
