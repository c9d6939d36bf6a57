#pragma once
// GPU tests: an activation tensor on the device in one of dtrain's two numerics (fp32 NCHW or bf16
// NHWC), filled from and read back as logical NCHW doubles, so float64 references stay in NCHW.
// Filling rounds the values to the storage type and hands the rounded values back, so the
// reference computes with exactly what the GPU sees. CUDA builds only.
#include <cstddef>
#include <cstring>
#include <vector>

#include "runtime/memory/dtype.h"
#include "tests/support/device_vector.h"

namespace dtrain::test {

struct ActivationLayout {
  int n = 1, c = 1, h = 1, w = 1;  // logical NCHW ([rows, features]: h = w = 1)
  bool bf16_nhwc = false;          // else fp32 NCHW
  size_t size() const { return size_t(n) * c * h * w; }
  size_t element_bytes() const { return bf16_nhwc ? 2 : 4; }
  // Logical NCHW index -> storage index.
  size_t storage_index(size_t logical) const {
    if (!bf16_nhwc) return logical;
    const size_t s = size_t(h) * w, ni = logical / (c * s), ci = logical / s % c, p = logical % s;
    return (ni * s + p) * c + ci;
  }
};

class DeviceActivations {
 public:
  DeviceActivations(const ActivationLayout& layout, std::vector<double>& values)
      : layout_(layout), device_(encode(layout, values)) {}
  explicit DeviceActivations(const ActivationLayout& layout)
      : layout_(layout), device_(layout.size() * layout.element_bytes()) {}

  template <typename T>
  T* as() const {
    return reinterpret_cast<T*>(device_.get());
  }
  std::vector<double> logical() const {
    const std::vector<unsigned char> host = device_.to_host();
    std::vector<double> out(layout_.size());
    for (size_t i = 0; i < out.size(); ++i) {
      const size_t at = layout_.storage_index(i);
      if (layout_.bf16_nhwc) {
        runtime::bfloat16 b;
        std::memcpy(&b, &host[2 * at], 2);
        out[i] = runtime::to_float(b);
      } else {
        float f;
        std::memcpy(&f, &host[4 * at], 4);
        out[i] = f;
      }
    }
    return out;
  }

 private:
  static std::vector<unsigned char> encode(const ActivationLayout& layout, std::vector<double>& values) {
    std::vector<unsigned char> host(values.size() * layout.element_bytes());
    for (size_t i = 0; i < values.size(); ++i) {
      const size_t at = layout.storage_index(i);
      if (layout.bf16_nhwc) {
        const runtime::bfloat16 b = runtime::to_bfloat16(static_cast<float>(values[i]));
        std::memcpy(&host[2 * at], &b, 2);
        values[i] = runtime::to_float(b);
      } else {
        const float f = static_cast<float>(values[i]);
        std::memcpy(&host[4 * at], &f, 4);
        values[i] = f;
      }
    }
    return host;
  }

  ActivationLayout layout_;
  DeviceVector<unsigned char> device_;
};

}  // namespace dtrain::test
