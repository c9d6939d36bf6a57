// DTRAIN_CUDA_GRAPHS: unset, empty or 1 replays graphs (the default), 0 is the eager step,
// anything else is a UsageError that names the variable and the value.
#include "train/engine/cuda_graphs_setting.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "runtime/base/error.h"

namespace dtrain::train {
namespace {

TEST(CudaGraphsSetting, GraphsUnlessZero) {
  EXPECT_TRUE(parse_cuda_graphs_setting(std::nullopt));
  EXPECT_TRUE(parse_cuda_graphs_setting(std::string()));
  EXPECT_TRUE(parse_cuda_graphs_setting(std::string("1")));
  EXPECT_FALSE(parse_cuda_graphs_setting(std::string("0")));
}

TEST(CudaGraphsSetting, AnyOtherValueIsAnErrorNamingTheVariable) {
  for (const char* bad : {"yes", "2", "true", " 1", "on", "off", "-1", "00"}) {
    try {
      parse_cuda_graphs_setting(std::string(bad));
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const runtime::UsageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("DTRAIN_CUDA_GRAPHS"), std::string::npos) << what;
      EXPECT_NE(what.find(std::string("\"") + bad + "\""), std::string::npos) << what;
    }
  }
}

TEST(CudaGraphsSetting, ReadsTheEnvironment) {
  const char* saved = getenv("DTRAIN_CUDA_GRAPHS");
  const std::string restore = saved ? saved : "";
  setenv("DTRAIN_CUDA_GRAPHS", "1", 1);
  EXPECT_TRUE(cuda_graphs_from_environment());
  setenv("DTRAIN_CUDA_GRAPHS", "0", 1);
  EXPECT_FALSE(cuda_graphs_from_environment());
  setenv("DTRAIN_CUDA_GRAPHS", "maybe", 1);
  EXPECT_THROW(cuda_graphs_from_environment(), runtime::UsageError);
  unsetenv("DTRAIN_CUDA_GRAPHS");
  EXPECT_TRUE(cuda_graphs_from_environment());
  if (saved) setenv("DTRAIN_CUDA_GRAPHS", restore.c_str(), 1);
}

}  // namespace
}  // namespace dtrain::train
