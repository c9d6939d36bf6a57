#pragma once
// The checks of the C ABI's stand-alone test programs (no gtest: they must also show how a plain C
// or C++ program uses the ABI): a failed check prints what was expected beside dtrain_last_error()
// and counts; the program's exit status reports the count.
#include <dtrain/dtrain.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace dtrain::test {

inline int failures = 0;

inline void check(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "CHECK FAILED: %s (last error: %s)\n", what.c_str(), dtrain_last_error());
  ++failures;
}

inline bool text_has(const char* fragment) {
  return std::strstr(dtrain_last_error(), fragment) != nullptr;
}

}  // namespace dtrain::test
