// TensorBoard event files: CRC-32C against published vectors, the writer's records read back with
// both CRCs checked (tests/support/tensorboard_reader.h), a damaged file refused, and the writer's
// errors. That TensorBoard itself loads our files is checked on the GPU machine, which has it
// (scripts/gpu_checks.sh).
#include "train/observe/tensorboard_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "runtime/base/error.h"
#include "runtime/io/crc32c.h"
#include "tests/support/tensorboard_reader.h"
#include "tests/support/test_seed.h"

namespace dtrain::train {
namespace {

namespace fs = std::filesystem;

// RFC 3720 (iSCSI), appendix B.4, and the common check value of CRC-32C; the one implementation
// behind checkpoints and event files.
TEST(Crc32c, PublishedVectors) {
  auto crc = [](const std::string& bytes) { return runtime::crc32c(bytes.data(), bytes.size()); };
  EXPECT_EQ(crc("123456789"), 0xE3069283u);
  EXPECT_EQ(crc(""), 0u);
  EXPECT_EQ(crc(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[static_cast<size_t>(i)] = static_cast<char>(i);
  EXPECT_EQ(crc(ascending), 0x46DD794Eu);
  // Continuing from a prefix's CRC gives the whole buffer's.
  EXPECT_EQ(runtime::crc32c("6789", 4, crc("12345")), 0xE3069283u);
}

class TensorBoardWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dtrain-tb-test-" + std::to_string(std::random_device()()));
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(TensorBoardWriterTest, RecordsReadBackWithTheirTagsStepsAndValues) {
  std::mt19937_64 rng(test::random_seed());
  std::uniform_real_distribution<double> value(-1e3, 1e3);
  std::vector<double> written;
  std::string path;
  {
    TensorBoardWriter writer((dir_ / "nested").string());
    path = writer.path();
    EXPECT_NE(fs::path(path).filename().string().find("tfevents"), std::string::npos) << path;
    for (int step = 0; step < 50; ++step) {
      written.push_back(value(rng));
      writer.scalar("train/loss", written.back(), step * 10);
    }
    writer.text("config", "    model: \"resnet\"\n    depth: 50", 7);
  }
  const std::vector<tensorboard::Event> events = test::read_tensorboard_events(path);
  ASSERT_EQ(events.size(), 52u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  for (int i = 0; i < 50; ++i) {
    const tensorboard::Event& e = events[static_cast<size_t>(i) + 1];
    ASSERT_EQ(e.summary().value_size(), 1);
    EXPECT_EQ(e.step(), i * 10);
    EXPECT_GT(e.wall_time(), 1.7e9);
    EXPECT_EQ(e.summary().value(0).tag(), "train/loss");
    EXPECT_EQ(e.summary().value(0).simple_value(), static_cast<float>(written[static_cast<size_t>(i)]));
  }
  const tensorboard::Summary::Value& text = events[51].summary().value(0);
  EXPECT_EQ(events[51].step(), 7);
  EXPECT_EQ(text.tag(), "config");
  EXPECT_EQ(text.metadata().plugin_data().plugin_name(), "text");
  EXPECT_EQ(text.tensor().dtype(), 7);  // a string tensor
  EXPECT_EQ(text.tensor().tensor_shape().dim_size(), 0);
  ASSERT_EQ(text.tensor().string_val_size(), 1);
  EXPECT_EQ(text.tensor().string_val(0), "    model: \"resnet\"\n    depth: 50");
}

TEST_F(TensorBoardWriterTest, ADamagedFileIsRefusedNamingTheRecord) {
  std::string path;
  {
    TensorBoardWriter writer(dir_.string());
    path = writer.path();
    writer.scalar("a", 1.0, 1);
    writer.scalar("b", 2.0, 2);
  }
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(-6, std::ios::end);  // inside the last record's data
  file.put('\x5A');
  file.close();
  try {
    test::read_tensorboard_events(path);
    FAIL() << "a flipped byte went unnoticed";
  } catch (const runtime::Error& e) {
    EXPECT_NE(std::string(e.what()).find("record 2: the data's CRC does not match"), std::string::npos) << e.what();
  }
}

TEST_F(TensorBoardWriterTest, NoDirectoryWritesNothing) {
  TensorBoardWriter writer("");
  writer.scalar("a", 1.0, 1);
  writer.text("b", "c", 1);
  EXPECT_TRUE(writer.path().empty());
}

TEST_F(TensorBoardWriterTest, AnUnusableDirectoryIsAUsageErrorNamingIt) {
  try {
    TensorBoardWriter writer("/proc/dtrain-tensorboard");
    FAIL() << "no error for a directory that cannot be made";
  } catch (const runtime::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("tensorboard_dir /proc/dtrain-tensorboard"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dtrain::train
