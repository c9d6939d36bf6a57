// Hostile idx headers: zero or overflowing dimensions are one UsageError naming
// the file, never an internal error, a division by zero or a read past the data.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/base/error.h"
#include "train/data/idx_dataset.h"

namespace dtrain::train {
namespace {

namespace fs = std::filesystem;

void put_be32(std::ofstream& out, uint32_t v) {
  const char bytes[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  out.write(bytes, 4);
}

class IdxHeader : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dtrain_idx_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // images: idx3 header (count, rows, cols) then `pixel_bytes` zeros; labels: `labels` zeros.
  std::string error_for(uint32_t count, uint32_t rows, uint32_t cols, size_t pixel_bytes, uint32_t labels) {
    images_ = dir_ + "/images-idx3-ubyte";
    const std::string labels_path = dir_ + "/labels-idx1-ubyte";
    {
      std::ofstream out(images_, std::ios::binary);
      put_be32(out, 0x803);
      put_be32(out, count);
      put_be32(out, rows);
      put_be32(out, cols);
      out << std::string(pixel_bytes, '\0');
      std::ofstream lab(labels_path, std::ios::binary);
      put_be32(lab, 0x801);
      put_be32(lab, labels);
      lab << std::string(labels, '\0');
    }
    try {
      IdxDataset data(images_, labels_path, false);
    } catch (const runtime::UsageError& e) {
      return e.what();
    }
    return "no error";
  }

  std::string dir_, images_;
};

TEST_F(IdxHeader, ZeroDimensionsNameTheFile) {
  for (const auto& [count, rows, cols] :
       {std::tuple<uint32_t, uint32_t, uint32_t>{1, 0, 28}, {1, 28, 0}, {0, 28, 28}}) {
    const std::string message = error_for(count, rows, cols, 0, count);
    EXPECT_NE(message.find(images_ + ": header says " + std::to_string(count) + " images of " + std::to_string(rows) +
                           "x" + std::to_string(cols)),
              std::string::npos)
        << message;
  }
}

TEST_F(IdxHeader, OverflowingDimensionsNameTheFile) {
  // 131072 images of 2^31 x 65536: the old size check wrapped to 0 pixel bytes and accepted the file.
  std::string message = error_for(131072, 0x80000000u, 65536, 0, 131072);
  EXPECT_NE(message.find(images_ + ": header says 131072 images of 2147483648x65536"), std::string::npos) << message;
  message = error_for(0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 16, 1);
  EXPECT_NE(message.find(images_ + ": header says"), std::string::npos) << message;
  // Plausible sides, a count the data does not hold.
  message = error_for(0xFFFFFFFFu, 65536, 65536, 64, 1);
  EXPECT_NE(message.find(images_ + ": header says 4294967295 images of 65536x65536 but the file holds 64"),
            std::string::npos)
      << message;
  EXPECT_EQ(error_for(2, 3, 4, 24, 2), "no error");
}

}  // namespace
}  // namespace dtrain::train
