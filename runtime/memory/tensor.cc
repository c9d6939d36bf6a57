#include "runtime/memory/tensor.h"

#include <limits>
#include <sstream>

namespace dtrain::runtime {

int64_t shape_numel(const Shape& shape) {
  int64_t numel = 1;
  for (const int64_t extent : shape) {
    DTRAIN_CHECK(extent >= 0) << "negative extent in shape " << shape_string(shape);
    DTRAIN_CHECK(extent == 0 || numel <= std::numeric_limits<int64_t>::max() / extent)
        << "shape " << shape_string(shape) << " overflows int64";
    numel *= extent;
  }
  return numel;
}

std::string shape_string(const Shape& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

Tensor::Tensor(DType dtype, Shape shape, MemoryKind kind)
    : dtype_(dtype),
      shape_(std::move(shape)),
      numel_(shape_numel(shape_)),
      buffer_(kind, static_cast<size_t>(numel_) * dtype_size(dtype)) {}

void Tensor::check_type(DType requested) const {
  DTRAIN_CHECK(requested == dtype_) << "tensor of " << dtype_name(dtype_) << " " << shape_string(shape_)
                                    << " accessed as " << dtype_name(requested);
}

}  // namespace dtrain::runtime
