// The file of measured convolution plans (models/conv_plan_file): lines round-trip, malformed lines
// are skipped with the rest kept, a file of another GPU or cuDNN (another first line) is not used,
// and writing replaces the file whole, from several processes at once too.
#include "models/conv_plan_file.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "tests/support/test_seed.h"

namespace dtrain::models {
namespace {

namespace fs = std::filesystem;

class ConvPlanFileTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dtrain_conv_plans_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path() const { return (dir_ / "sub" / "plans.txt").string(); }
  fs::path dir_;
};

constexpr const char* kHeader = "# dtrain convolution plans, format 1: NVIDIA H200, sm_90, 132 SMs, cuDNN 91900";

StoredConvPlan random_plan(std::mt19937_64& rng) {
  StoredConvPlan plan;
  plan.engine = static_cast<int64_t>(rng() % 100);
  const int knobs = static_cast<int>(rng() % 5);
  for (int i = 0; i < knobs; ++i) plan.knobs.emplace_back(rng() % 44, static_cast<int64_t>(rng() % 1000) - 1);
  plan.measured_ms = static_cast<float>(rng() % 100000) / 1000.0f;
  return plan;
}

void expect_same(const StoredConvPlan& a, const StoredConvPlan& b) {
  EXPECT_EQ(a.engine, b.engine);
  EXPECT_EQ(a.knobs, b.knobs);
  EXPECT_NEAR(a.measured_ms, b.measured_ms, 1e-5 * b.measured_ms);
}

TEST_F(ConvPlanFileTest, PlansRoundTripThroughTheFile) {
  std::mt19937_64 rng(test::random_seed());
  StoredConvPlans plans;
  for (int i = 0; i < 50; ++i) plans["bf16nhwc/forward/beta0/n256c64h56w56k" + std::to_string(i)] = random_plan(rng);
  std::string error;
  ASSERT_TRUE(write_conv_plan_file(path(), kHeader, plans, &error)) << error;  // creates sub/
  const StoredConvPlans back = read_conv_plan_file(path(), kHeader);
  ASSERT_EQ(back.size(), plans.size());
  for (const auto& [key, plan] : plans) {
    ASSERT_EQ(back.count(key), 1u) << key;
    expect_same(back.at(key), plan);
  }
  for (const auto& entry : fs::directory_iterator(dir_ / "sub")) {
    EXPECT_EQ(entry.path().filename(), "plans.txt") << "a temporary file was left behind";
  }
}

TEST_F(ConvPlanFileTest, AnotherGpuOrCudnnOrAMissingFileGivesNoPlans) {
  StoredConvPlans plans;
  plans["k"] = StoredConvPlan{3, {{1, 2}}, 0.5f};
  std::string error;
  ASSERT_TRUE(write_conv_plan_file(path(), kHeader, plans, &error)) << error;
  EXPECT_EQ(read_conv_plan_file(path(), kHeader).size(), 1u);
  EXPECT_TRUE(read_conv_plan_file(path(), std::string(kHeader) + "0").empty());
  EXPECT_TRUE(read_conv_plan_file((dir_ / "missing.txt").string(), kHeader).empty());
}

TEST_F(ConvPlanFileTest, MalformedLinesAreSkippedAndTheRestKept) {
  const std::vector<std::string> bad = {
      "onlykey",
      "k engine=1 knobs= ",
      "k engine=x knobs= ms=1",
      "k engine=-4 knobs= ms=1",
      "k engine=1 knobs=1:2, ms=1",
      "k engine=1 knobs=1-2 ms=1",
      "k engine=1 knobs=-1:2 ms=1",
      "k engine=1 knobs= ms=nan",
      "k engine=1 knobs= ms=-1",
      "k engine=1 knobs= ms=1 extra",
      "k engine=12abc knobs= ms=1",
      "k motor=1 knobs= ms=1",
  };
  for (const std::string& line : bad) {
    std::string key;
    StoredConvPlan plan;
    EXPECT_FALSE(parse_conv_plan_line(line, &key, &plan)) << "accepted: " << line;
  }
  fs::create_directories(dir_);
  const std::string file = (dir_ / "plans.txt").string();
  {
    std::ofstream out(file);
    out << kHeader << "\n"
        << bad[2] << "\n"
        << "good engine=7 knobs=3:1,5:-1 ms=0.25\n\n"
        << bad[4] << "\n";
  }
  const StoredConvPlans plans = read_conv_plan_file(file, kHeader);
  ASSERT_EQ(plans.size(), 1u);
  expect_same(plans.at("good"), StoredConvPlan{7, {{3, 1}, {5, -1}}, 0.25f});
}

TEST_F(ConvPlanFileTest, AnUnwritableFolderIsAnErrorNamingIt) {
  fs::create_directories(dir_);
  const std::string blocker = (dir_ / "a_file").string();
  std::ofstream(blocker) << "x";
  std::string error;
  EXPECT_FALSE(write_conv_plan_file(blocker + "/plans.txt", kHeader, {}, &error));
  EXPECT_NE(error.find(blocker), std::string::npos) << error;
}

// Ranks of a node write the same file at once: every reader sees one whole file, never a mix.
TEST_F(ConvPlanFileTest, ConcurrentWritersLeaveOneWholeFile) {
  std::mt19937_64 rng(test::random_seed());
  constexpr int kWriters = 4;
  std::vector<StoredConvPlans> versions(kWriters);
  for (int w = 0; w < kWriters; ++w) {
    for (int i = 0; i < 200; ++i) {
      std::string key = "w";  // built up in steps: GCC 12 warns (-Wrestrict) on the one-expression form
      key += std::to_string(w);
      key += "/k";
      key += std::to_string(i);
      versions[static_cast<size_t>(w)][key] = random_plan(rng);
    }
  }
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::string error;
      for (int round = 0; round < 20; ++round) {
        if (!write_conv_plan_file(path(), kHeader, versions[static_cast<size_t>(w)], &error)) ::_exit(1);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const StoredConvPlans last = read_conv_plan_file(path(), kHeader);
  ASSERT_EQ(last.size(), 200u);
  const std::string writer = last.begin()->first.substr(0, last.begin()->first.find('/'));
  for (const auto& [key, plan] : last) EXPECT_EQ(key.substr(0, key.find('/')), writer) << "lines of two writers";
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir_ / "sub")) files += entry.is_regular_file();
  EXPECT_EQ(files, 1u) << "temporary files left behind";
}

}  // namespace
}  // namespace dtrain::models
