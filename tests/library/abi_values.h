#pragma once
// Test support for the C ABI: typed host buffers of any dtrain_dtype read and written as doubles,
// inputs every rank can regenerate for every other rank, and the exact result each collective
// must give. Inputs are small integers, so sums are exact in every dtype and any summation order.
#include <dtrain/dtrain.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/memory/dtype.h"

namespace dtrain::test {

constexpr int kDtypes[] = {DTRAIN_UINT8,   DTRAIN_INT8,     DTRAIN_INT32,   DTRAIN_INT64,
                           DTRAIN_FLOAT16, DTRAIN_BFLOAT16, DTRAIN_FLOAT32, DTRAIN_FLOAT64};
constexpr int64_t kCounts[] = {0, 1, 7919, (int64_t{1} << 20) + 3};

inline size_t dtype_bytes(int dtype) {
  switch (dtype) {
    case DTRAIN_UINT8:
    case DTRAIN_INT8: return 1;
    case DTRAIN_FLOAT16:
    case DTRAIN_BFLOAT16: return 2;
    case DTRAIN_INT32:
    case DTRAIN_FLOAT32: return 4;
    default: return 8;
  }
}
inline bool floating(int dtype) {
  return dtype >= DTRAIN_FLOAT16;
}

// A host buffer of `count` elements of `dtype`, 8-byte aligned.
class Buffer {
 public:
  Buffer(int dtype, int64_t count)
      : dtype_(dtype), words_((static_cast<size_t>(count) * dtype_bytes(dtype) + 7) / 8 + 1) {}
  void* data() { return words_.data(); }
  char* bytes() { return reinterpret_cast<char*>(words_.data()); }
  void set(int64_t i, double v) {
    char* p = bytes() + i * static_cast<int64_t>(dtype_bytes(dtype_));
    switch (dtype_) {
      case DTRAIN_UINT8: *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(v); break;
      case DTRAIN_INT8: *reinterpret_cast<int8_t*>(p) = static_cast<int8_t>(v); break;
      case DTRAIN_INT32: *reinterpret_cast<int32_t*>(p) = static_cast<int32_t>(v); break;
      case DTRAIN_INT64: *reinterpret_cast<int64_t*>(p) = static_cast<int64_t>(v); break;
      case DTRAIN_FLOAT16: *reinterpret_cast<runtime::float16*>(p) = runtime::to_float16(static_cast<float>(v)); break;
      case DTRAIN_BFLOAT16:
        *reinterpret_cast<runtime::bfloat16*>(p) = runtime::to_bfloat16(static_cast<float>(v));
        break;
      case DTRAIN_FLOAT32: *reinterpret_cast<float*>(p) = static_cast<float>(v); break;
      default: *reinterpret_cast<double*>(p) = v;
    }
  }
  double get(int64_t i) const {
    const char* p = reinterpret_cast<const char*>(words_.data()) + i * static_cast<int64_t>(dtype_bytes(dtype_));
    switch (dtype_) {
      case DTRAIN_UINT8: return *reinterpret_cast<const uint8_t*>(p);
      case DTRAIN_INT8: return *reinterpret_cast<const int8_t*>(p);
      case DTRAIN_INT32: return *reinterpret_cast<const int32_t*>(p);
      case DTRAIN_INT64: return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
      case DTRAIN_FLOAT16: return runtime::to_float(*reinterpret_cast<const runtime::float16*>(p));
      case DTRAIN_BFLOAT16: return runtime::to_float(*reinterpret_cast<const runtime::bfloat16*>(p));
      case DTRAIN_FLOAT32: return *reinterpret_cast<const float*>(p);
      default: return *reinterpret_cast<const double*>(p);
    }
  }

 private:
  int dtype_;
  std::vector<uint64_t> words_;
};

// Rank r's input element i of stream `salt`: integers in [-4, 4] ([0, 8] for uint8), so that the
// sum of 4 ranks fits int8 and every float format holds it exactly.
inline double input(int rank, int64_t i, int dtype, int salt = 0) {
  const int64_t v = (i * 7 + rank * 13 + salt * 5) % 9;
  return dtype == DTRAIN_UINT8 ? static_cast<double>(v) : static_cast<double>(v - 4);
}

// What the library promises for an average: the exact sum times 1/size, in fp32 for fp32 and the
// 16-bit formats (rounded once to them), in fp64 for fp64.
inline double rounded(double v, int dtype) {
  if (dtype == DTRAIN_FLOAT16) return runtime::to_float(runtime::to_float16(static_cast<float>(v)));
  if (dtype == DTRAIN_BFLOAT16) return runtime::to_float(runtime::to_bfloat16(static_cast<float>(v)));
  if (dtype == DTRAIN_FLOAT32) return static_cast<float>(v);
  return v;
}
inline double reduce_reference(int64_t i, int dtype, int op, int size, int salt = 0) {
  double result = input(0, i, dtype, salt);
  for (int r = 1; r < size; ++r) {
    const double v = input(r, i, dtype, salt);
    if (op == DTRAIN_MIN)
      result = std::min(result, v);
    else if (op == DTRAIN_MAX)
      result = std::max(result, v);
    else
      result += v;
  }
  if (op != DTRAIN_AVERAGE) return result;
  if (dtype == DTRAIN_FLOAT64) return result * (1.0 / size);
  return rounded(static_cast<float>(result) * (1.0f / static_cast<float>(size)), dtype);
}

inline std::string label(const char* what, int dtype, int64_t count, int extra = 0, int extra2 = 0) {
  return std::string(what) + "/" + std::to_string(dtype) + "/" + std::to_string(count) + "/" + std::to_string(extra) +
         "/" + std::to_string(extra2);
}

// An all-gather where rank r sends count + r x skew elements: each rank's count, where its part
// lands in the result, and the result's length.
struct GatherLayout {
  std::vector<int64_t> counts;
  std::vector<int64_t> offsets;
  int64_t total = 0;
};

inline GatherLayout gather_layout(int64_t count, int skew, int ranks) {
  GatherLayout g;
  for (int r = 0; r < ranks; ++r) {
    g.counts.push_back(count + r * skew);
    g.offsets.push_back(g.total);
    g.total += g.counts.back();
  }
  return g;
}

}  // namespace dtrain::test
