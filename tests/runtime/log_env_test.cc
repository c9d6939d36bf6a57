#include <gtest/gtest.h>
#include <stdlib.h>

#include "runtime/base/env.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/base/process_identity.h"
#include "runtime/rank/topology.h"

namespace dtrain::runtime {
namespace {

TEST(Log, ParsesLevelsAndRejectsGarbageNamingTheSource) {
  EXPECT_EQ(parse_log_level("debug", "X"), LogLevel::kDebug);
  EXPECT_EQ(parse_log_level("info", "X"), LogLevel::kInfo);
  EXPECT_EQ(parse_log_level("warn", "X"), LogLevel::kWarn);
  EXPECT_EQ(parse_log_level("error", "X"), LogLevel::kError);
  try {
    parse_log_level("loud", "DTRAIN_LOG_LEVEL");
    FAIL() << "no exception";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("DTRAIN_LOG_LEVEL='loud'"), std::string::npos) << e.what();
  }
}

TEST(Log, LevelFiltersMessages) {
  set_log_level(LogLevel::kWarn);
  EXPECT_FALSE(log_enabled(LogLevel::kInfo));
  EXPECT_TRUE(log_enabled(LogLevel::kWarn));
  EXPECT_TRUE(log_enabled(LogLevel::kError));
  set_log_level(LogLevel::kInfo);
}

TEST(Log, PrefixNamesHostRankAndSize) {
  set_process_identity(3, 16, 3);
  EXPECT_EQ(rank_prefix(), "[" + process_identity().host + ":3/16]");
  EXPECT_FALSE(is_world_rank_zero());
  set_process_identity(0, 16, 0);
  EXPECT_TRUE(log_enabled_on_rank_zero(LogLevel::kError));
  set_process_identity(-1, -1, -1);
  EXPECT_EQ(rank_prefix(), "[" + process_identity().host + "]");  // before MPI: no rank yet
}

TEST(Env, ParsesIntegersAndNamesTheVariableOnError) {
  EXPECT_EQ(parse_int_in_range("42", 1, 100, "V"), 42);
  EXPECT_THROW(parse_int_in_range("4x", 1, 100, "V"), UsageError);
  EXPECT_THROW(parse_int_in_range("", 1, 100, "V"), UsageError);
  EXPECT_THROW(parse_int_in_range("0", 1, 100, "V"), UsageError);
  EXPECT_THROW(parse_int_in_range("99999999999999999999", 1, 100, "V"), UsageError);
  try {
    parse_int_in_range("abc", 1, 10, "DTRAIN_FOO");
    FAIL() << "no exception";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("DTRAIN_FOO='abc' is not an integer"), std::string::npos) << e.what();
  }
}

TEST(Env, RanksPerNodeMustBePositiveAndDivideTheWorld) {
  unsetenv("DTRAIN_RANKS_PER_NODE");
  EXPECT_EQ(ranks_per_node_from_env(4), std::nullopt);
  setenv("DTRAIN_RANKS_PER_NODE", "2", 1);
  EXPECT_EQ(ranks_per_node_from_env(4), 2);
  setenv("DTRAIN_RANKS_PER_NODE", "3", 1);
  EXPECT_THROW(ranks_per_node_from_env(4), UsageError);
  setenv("DTRAIN_RANKS_PER_NODE", "0", 1);
  EXPECT_THROW(ranks_per_node_from_env(4), UsageError);
  setenv("DTRAIN_RANKS_PER_NODE", "two", 1);
  EXPECT_THROW(ranks_per_node_from_env(4), UsageError);
  unsetenv("DTRAIN_RANKS_PER_NODE");
}

}  // namespace
}  // namespace dtrain::runtime
