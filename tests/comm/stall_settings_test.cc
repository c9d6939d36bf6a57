// The stall inspector's thresholds: DTRAIN_STALL_WARNING_SECONDS / DTRAIN_STALL_ABORT_SECONDS over
// the defaults (60 s, 600 s: a stalled job ends by default), and one clear error naming the variable
// for anything else.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "comm/diagnostics/stall_inspector.h"
#include "runtime/base/error.h"

namespace dtrain::comm {
namespace {

TEST(StallSettings, DefaultsAndEnvironment) {
  unsetenv("DTRAIN_STALL_WARNING_SECONDS");
  unsetenv("DTRAIN_STALL_ABORT_SECONDS");
  EXPECT_EQ(stall_settings_from_env().warning_seconds, 60.0);
  EXPECT_EQ(stall_settings_from_env().abort_seconds, 600.0);
  setenv("DTRAIN_STALL_ABORT_SECONDS", "0", 1);  // 0 turns the abort off
  EXPECT_EQ(stall_settings_from_env().abort_seconds, 0.0);
  setenv("DTRAIN_STALL_WARNING_SECONDS", "1.5", 1);
  setenv("DTRAIN_STALL_ABORT_SECONDS", "3", 1);
  EXPECT_EQ(stall_settings_from_env().warning_seconds, 1.5);
  EXPECT_EQ(stall_settings_from_env().abort_seconds, 3.0);
  setenv("DTRAIN_STALL_WARNING_SECONDS", "0", 1);
  EXPECT_EQ(stall_settings_from_env().warning_seconds, 0.0);
  unsetenv("DTRAIN_STALL_WARNING_SECONDS");
  unsetenv("DTRAIN_STALL_ABORT_SECONDS");
}

TEST(StallSettings, BadValuesNameTheVariable) {
  for (const char* bad : {"-1", "abc", "5s", "inf", "nan", "1e7", " "}) {
    setenv("DTRAIN_STALL_ABORT_SECONDS", bad, 1);
    try {
      stall_settings_from_env();
      ADD_FAILURE() << "no error for '" << bad << "'";
    } catch (const runtime::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("DTRAIN_STALL_ABORT_SECONDS='" + std::string(bad) +
                                           "' must be a number of seconds"),
                std::string::npos)
          << e.what();
    }
  }
  unsetenv("DTRAIN_STALL_ABORT_SECONDS");
  EXPECT_THROW(set_stall_settings(StallSettings{-1, 0}), runtime::UsageError);
  EXPECT_THROW(set_stall_settings(StallSettings{60, 1e9}), runtime::UsageError);
}

}  // namespace
}  // namespace dtrain::comm
