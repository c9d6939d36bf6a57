#pragma once
// GPU tests: float64 reference values to and from the element types the kernels store (fp32,
// bf16), so a test draws values, rounds them once to the stored type and compares in float64.
#include <type_traits>

#include "runtime/memory/dtype.h"

namespace dtrain::test {

template <typename T>
T narrow(double v) {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(v);
  } else {
    return runtime::to_bfloat16(static_cast<float>(v));
  }
}
inline double widen(float v) {
  return v;
}
inline double widen(runtime::bfloat16 v) {
  return runtime::to_float(v);
}

}  // namespace dtrain::test
