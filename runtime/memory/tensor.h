#pragma once
// A Buffer with an element type and a shape. Dense, row-major, owned.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/base/error.h"
#include "runtime/memory/buffer.h"
#include "runtime/memory/dtype.h"

namespace dtrain::runtime {

using Shape = std::vector<int64_t>;

// Product of the extents; an Error for negative extents or overflow.
int64_t shape_numel(const Shape& shape);
std::string shape_string(const Shape& shape);  // "[2, 3, 224, 224]"

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape, MemoryKind kind = MemoryKind::kHost);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  size_t bytes() const { return buffer_.bytes(); }
  MemoryKind kind() const { return buffer_.kind(); }
  void* raw() { return buffer_.data(); }
  const void* raw() const { return buffer_.data(); }

  // Typed access; an Error if T does not match the dtype.
  template <typename T>
  T* data() {
    check_type(dtype_of<T>());
    return static_cast<T*>(buffer_.data());
  }
  template <typename T>
  const T* data() const {
    check_type(dtype_of<T>());
    return static_cast<const T*>(buffer_.data());
  }

 private:
  void check_type(DType requested) const;

  DType dtype_ = DType::kF32;
  Shape shape_;
  int64_t numel_ = 0;
  Buffer buffer_;
};

}  // namespace dtrain::runtime
