// Checkpoint files: CRC-32C, atomic write + keep-K, and clear errors for truncated or corrupt files,
// with "latest" falling back to the previous valid checkpoint.
#include "train/checkpoint/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "runtime/base/error.h"

namespace dtrain::train {
namespace {

namespace fs = std::filesystem;

TEST(Checkpoint, RoundTripKeepLastAndCorruptionHandling) {
  const std::string dir = fs::temp_directory_path() / ("dtrain_ckpt_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::vector<float> params(1000), momentum(1000);
  std::iota(params.begin(), params.end(), 0.5f);
  std::vector<NamedTensor> tensors = {{"params", params.data(), params.size()},
                                      {"momentum", momentum.data(), momentum.size()}};
  proto::CheckpointHeader header;
  header.mutable_config()->set_batch_per_rank(7);
  header.set_run_id(new_run_id());
  std::vector<std::string> paths;
  for (int step = 1; step <= 4; ++step) {
    header.set_global_step(step * 10);
    params[0] = static_cast<float>(step);
    paths.push_back(write_checkpoint(dir, header, tensors, 2));
  }
  EXPECT_FALSE(fs::exists(paths[0]));
  EXPECT_FALSE(fs::exists(paths[1])) << "only the newest 2 are kept";
  EXPECT_TRUE(fs::exists(paths[3]));
  for (const auto& entry : fs::directory_iterator(dir)) EXPECT_NE(entry.path().extension(), ".tmp");

  std::vector<float> got(1000), got_m(1000);
  std::vector<NamedTensor> into = {{"params", got.data(), got.size()}, {"momentum", got_m.data(), got_m.size()}};
  proto::CheckpointHeader read;
  EXPECT_EQ(resolve_checkpoint("latest", dir, &read, into), paths[3]);
  EXPECT_EQ(read.global_step(), 40);
  EXPECT_EQ(read.config().batch_per_rank(), 7);
  EXPECT_EQ(got[0], 4.0f);
  EXPECT_EQ(got[999], params[999]);

  // Flip one byte of tensor data: the CRC names the file and tensor; "latest" falls back.
  {
    std::fstream f(paths[3], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-10, std::ios::end);
    f.put('\x7f');
  }
  try {
    read_checkpoint(paths[3], &read, into);
    FAIL() << "no error";
  } catch (const runtime::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(paths[3]), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("CRC32C"), std::string::npos) << e.what();
  }
  EXPECT_EQ(resolve_checkpoint("latest", dir, &read, into), paths[2]);
  EXPECT_EQ(got[0], 3.0f);

  // Truncate the older one too: nothing valid is left.
  fs::resize_file(paths[2], 100);
  EXPECT_THROW(read_checkpoint(paths[2], &read, into), runtime::UsageError);
  EXPECT_THROW(resolve_checkpoint("latest", dir, &read, into), runtime::UsageError);
  // A model of another size does not load.
  std::vector<float> small(10);
  header.set_global_step(50);
  const std::string fresh = write_checkpoint(dir, header, tensors, 2);
  EXPECT_THROW(read_checkpoint(fresh, &read, {{"params", small.data(), small.size()}}), runtime::UsageError);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dtrain::train
