// Checkpoints that never lose or mix up a run: rotation deletes only
// the writing run's files, names are parsed strictly, one flipped byte anywhere in the header is
// rejected, the header length is checked against the file size, a failed write is an I/O error
// that leaves no temporary file, and temporaries of killed writes are removed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "runtime/base/error.h"
#include "runtime/io/crc32c.h"
#include "train/checkpoint/checkpoint.h"

namespace dtrain::train {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed at the end.
class CheckpointRecovery : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dtrain_ckpt_recovery_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    params_.resize(1000);
    std::iota(params_.begin(), params_.end(), 0.25f);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<NamedTensor> tensors() { return {{"params", params_.data(), params_.size()}}; }

  std::string write(const std::string& run_id, int64_t step, int keep) {
    proto::CheckpointHeader header;
    header.set_run_id(run_id);
    header.set_global_step(step);
    header.mutable_config()->set_batch_per_rank(7);
    return write_checkpoint(dir_, header, tensors(), keep);
  }

  std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string dir_;
  std::vector<float> params_;
};

TEST_F(CheckpointRecovery, NamesAreParsedStrictly) {
  int64_t step = -1;
  std::string run;
  EXPECT_TRUE(parse_checkpoint_name("ckpt-5000-0123456789abcdef.dtrain", &step, &run));
  EXPECT_EQ(step, 5000);
  EXPECT_EQ(run, "0123456789abcdef");
  EXPECT_TRUE(parse_checkpoint_name("ckpt-0.dtrain", &step, &run)) << "the older form, no run id";
  EXPECT_EQ(run, "");
  for (const char* bad : {"ckpt-5000-good.dtrain", "ckpt-5000x.dtrain", "ckpt-.dtrain", "ckpt--1.dtrain",
                          "ckpt-+5.dtrain", "ckpt-007.dtrain", "ckpt-5000.dtrain.tmp", "ckpt-5000.dtrain.bak",
                          "ckpt-5000-0123456789ABCDEF.dtrain", "ckpt-5000-0123456789abcde.dtrain",
                          "ckpt-99999999999999999999.dtrain", "xckpt-5.dtrain", "ckpt-5-0123456789abcdef-1.dtrain"}) {
    EXPECT_FALSE(parse_checkpoint_name(bad, &step, &run)) << bad;
  }
  const std::string id = new_run_id();
  EXPECT_TRUE(parse_checkpoint_name("ckpt-1-" + id + ".dtrain", &step, &run)) << id;
  EXPECT_NE(new_run_id(), id);
}

// A new run in an old run's directory: before, rotation kept the highest steps in the directory,
// so the new run deleted its own fresh checkpoint and "latest" resumed the old run.
TEST_F(CheckpointRecovery, RotationDeletesOnlyThisRunsFiles) {
  const std::string old_run = new_run_id(), new_run = new_run_id();
  write(old_run, 1000, 2);
  const std::string old_2000 = write(old_run, 2000, 2);
  const std::string old_3000 = write(old_run, 3000, 2);
  EXPECT_FALSE(fs::exists(dir_ + "/ckpt-1000-" + old_run + ".dtrain")) << "the old run keeps its newest 2";
  // A backup named by hand is not a checkpoint: never parsed as step 5000, never rotated away.
  fs::copy_file(old_3000, dir_ + "/ckpt-5000-good.dtrain");

  const std::string fresh = write(new_run, 10, 1);
  EXPECT_TRUE(fs::exists(fresh)) << "the new run deleted its own checkpoint";
  EXPECT_TRUE(fs::exists(old_2000));
  EXPECT_TRUE(fs::exists(old_3000));
  const std::string fresher = write(new_run, 20, 1);
  EXPECT_FALSE(fs::exists(fresh)) << "keep 1 of the new run's";
  EXPECT_TRUE(fs::exists(old_2000) && fs::exists(old_3000) && fs::exists(dir_ + "/ckpt-5000-good.dtrain"));

  std::vector<float> got(params_.size());
  proto::CheckpointHeader header;
  EXPECT_EQ(resolve_checkpoint("latest", dir_, &header, {{"params", got.data(), got.size()}}), fresher)
      << "latest is the newest written, not the highest step";
  EXPECT_EQ(header.run_id(), new_run);
  EXPECT_EQ(header.global_step(), 20);
  const std::vector<CheckpointFile> listed = list_checkpoints(dir_);
  ASSERT_EQ(listed.size(), 3u) << "ckpt-5000-good.dtrain is not listed";
  EXPECT_EQ(listed[0].path, fresher);
  EXPECT_EQ(listed[1].step, 3000);
}

TEST_F(CheckpointRecovery, EveryFlippedHeaderByteIsRejectedNamingTheFile) {
  const std::string path = write(new_run_id(), 123456, 1);
  uint64_t length = 0;
  {
    std::ifstream in(path, std::ios::binary);
    in.seekg(8);
    in.read(reinterpret_cast<char*>(&length), sizeof(length));
  }
  ASSERT_GT(length, 0u);
  std::vector<float> got(params_.size());
  const std::vector<NamedTensor> into = {{"params", got.data(), got.size()}};
  proto::CheckpointHeader header;
  // Magic, length, checksum and the header itself (global step, config, tensor table).
  for (uint64_t at = 0; at < 20 + length; ++at) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    const char original = static_cast<char>(f.get());
    f.seekp(static_cast<std::streamoff>(at));
    f.put(static_cast<char>(original ^ 0x04));
    f.flush();
    try {
      read_checkpoint(path, &header, into);
      ADD_FAILURE() << "byte " << at << " flipped, and the checkpoint was accepted (global step "
                    << header.global_step() << ")";
    } catch (const runtime::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    f.seekp(static_cast<std::streamoff>(at));
    f.put(original);
  }
  read_checkpoint(path, &header, into);
  EXPECT_EQ(header.global_step(), 123456);
  EXPECT_EQ(got, params_);
}

TEST_F(CheckpointRecovery, HeaderLengthIsCheckedAgainstTheFileSize) {
  const std::string path = write(new_run_id(), 1, 1);
  const uint64_t huge = uint64_t{1} << 29;  // under the old 1 GiB plausibility limit: allocated before
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    f.write(reinterpret_cast<const char*>(&huge), sizeof(huge));
  }
  proto::CheckpointHeader header;
  try {
    read_checkpoint(path, &header, {});
    FAIL() << "accepted";
  } catch (const runtime::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": header length 536870912 does not fit the file's"), std::string::npos)
        << e.what();
  }
}

// A full disk (here the file size limit: writes fail with EFBIG) names the file, is not a usage
// error, and leaves neither the temporary file nor a checkpoint.
TEST_F(CheckpointRecovery, FailedWriteIsAnIoErrorAndLeavesNoTemporary) {
  params_.assign(100000, 1.0f);  // 400 KB, over the limit below
  fs::create_directories(dir_);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit limited = saved;
  limited.rlim_cur = 64 * 1024;
  void (*previous)(int) = ::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  std::string message = "no error";
  bool usage = false;
  try {
    write(new_run_id(), 7, 1);
  } catch (const runtime::UsageError& e) {
    usage = true;
    message = e.what();
  } catch (const runtime::Error& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ::signal(SIGXFSZ, previous);
  EXPECT_FALSE(usage) << "an I/O error is not a usage error: " << message;
  EXPECT_NE(message.find("I/O error writing checkpoint " + dir_ + "/ckpt-7-"), std::string::npos) << message;
  EXPECT_NE(message.find(".dtrain.tmp"), std::string::npos) << message;
  EXPECT_TRUE(files().empty()) << "left behind: " << files().front();
}

// Checkpoints of earlier versions (magic DTRAINCK, no header checksum, ckpt-<step>.dtrain) still
// resume, after every checkpoint with a run id; rotation never deletes them.
TEST_F(CheckpointRecovery, OlderFormatStillReads) {
  fs::create_directories(dir_);
  proto::CheckpointHeader old_header;
  old_header.set_global_step(900);
  proto::TensorEntry* entry = old_header.add_tensors();
  entry->set_name("params");
  entry->set_count(params_.size());
  entry->set_offset(0);
  entry->set_crc32c(runtime::crc32c(params_.data(), params_.size() * sizeof(float)));
  const std::string head = old_header.SerializeAsString();
  const uint64_t length = head.size();
  const std::string legacy = dir_ + "/ckpt-900.dtrain";
  {
    std::ofstream out(legacy, std::ios::binary);
    out.write("DTRAINCK", 8);
    out.write(reinterpret_cast<const char*>(&length), sizeof(length));
    out << head;
    out.write(reinterpret_cast<const char*>(params_.data()), static_cast<std::streamsize>(params_.size() * 4));
  }
  std::vector<float> got(params_.size());
  proto::CheckpointHeader header;
  EXPECT_EQ(resolve_checkpoint("latest", dir_, &header, {{"params", got.data(), got.size()}}), legacy);
  EXPECT_EQ(header.global_step(), 900);
  EXPECT_EQ(got, params_);
  const std::string id = new_run_id();
  const std::string fresh = write(id, 10, 1);
  write(id, 20, 1);
  EXPECT_TRUE(fs::exists(legacy));
  EXPECT_EQ(resolve_checkpoint("latest", dir_, &header, {{"params", got.data(), got.size()}}),
            dir_ + "/ckpt-20-" + id + ".dtrain");
}

TEST_F(CheckpointRecovery, TemporariesOfKilledWritesAreRemoved) {
  const std::string id = new_run_id();
  const std::string kept = write(id, 5, 1);
  for (const std::string& name :
       {"ckpt-6-" + id + ".dtrain.tmp", std::string("ckpt-3.dtrain.tmp"), std::string("ckpt-5000-good.dtrain.tmp"),
        std::string("notes.tmp"), std::string("ckpt-6-" + id + ".dtrain.tmp.bak")}) {
    std::ofstream(dir_ + "/" + name) << "partial";
  }
  fs::create_directories(dir_ + "/sub");
  std::ofstream(dir_ + "/sub/ckpt-8-" + id + ".dtrain.tmp") << "not in the checkpoint directory itself";
  std::vector<std::string> removed = remove_stale_temporaries(dir_);
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<std::string>{dir_ + "/ckpt-3.dtrain.tmp", dir_ + "/ckpt-6-" + id + ".dtrain.tmp"}));
  EXPECT_EQ(files(), (std::vector<std::string>{fs::path(kept).filename().string(), "ckpt-5000-good.dtrain.tmp",
                                               "ckpt-6-" + id + ".dtrain.tmp.bak", "notes.tmp", "sub"}));
  EXPECT_TRUE(fs::exists(dir_ + "/sub/ckpt-8-" + id + ".dtrain.tmp"));
}

}  // namespace
}  // namespace dtrain::train
