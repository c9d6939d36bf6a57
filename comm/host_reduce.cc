#include "comm/host_reduce.h"

#include <cstring>

#include "runtime/core/error.h"

namespace dtrain::comm {

void add_scaled(float* out, const float* a, const float* b, size_t n, float scale) {
  if (scale == 1.0f) {
    for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = (a[i] + b[i]) * scale;
  }
}

void scale_copy(float* out, const float* in, size_t n, float scale) {
  if (scale == 1.0f) {
    if (out != in && n > 0) std::memcpy(out, in, n * sizeof(float));
    return;
  }
  for (size_t i = 0; i < n; ++i) out[i] = in[i] * scale;
}

void widen_to_f32(const void* in, core::DType dtype, float* out, size_t n) {
  switch (dtype) {
    case core::DType::kF32:
      if (n > 0 && static_cast<const void*>(out) != in) std::memcpy(out, in, n * sizeof(float));
      return;
    case core::DType::kBF16: {
      const auto* src = static_cast<const core::bfloat16*>(in);
      for (size_t i = 0; i < n; ++i) out[i] = core::to_float(src[i]);
      return;
    }
    case core::DType::kF16: {
      const auto* src = static_cast<const core::float16*>(in);
      for (size_t i = 0; i < n; ++i) out[i] = core::to_float(src[i]);
      return;
    }
    default: DTRAIN_FAIL() << "cannot widen " << core::dtype_name(dtype) << " to fp32";
  }
}

void narrow_from_f32(const float* in, float scale, void* out, core::DType dtype, size_t n) {
  switch (dtype) {
    case core::DType::kF32: scale_copy(static_cast<float*>(out), in, n, scale); return;
    case core::DType::kBF16: {
      auto* dst = static_cast<core::bfloat16*>(out);
      for (size_t i = 0; i < n; ++i) dst[i] = core::to_bfloat16(in[i] * scale);
      return;
    }
    case core::DType::kF16: {
      auto* dst = static_cast<core::float16*>(out);
      for (size_t i = 0; i < n; ++i) dst[i] = core::to_float16(in[i] * scale);
      return;
    }
    default: DTRAIN_FAIL() << "cannot narrow fp32 to " << core::dtype_name(dtype);
  }
}

}  // namespace dtrain::comm
