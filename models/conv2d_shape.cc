#include "models/conv2d_shape.h"

#include <sstream>

#include "runtime/base/error.h"

namespace dtrain::models {

std::string Conv2dShape::describe() const {
  std::ostringstream s;
  s << "N=" << batch << " C=" << in_channels << " HxW=" << in_h << "x" << in_w << " -> K=" << out_channels
    << " RxS=" << kernel_h << "x" << kernel_w << " stride " << stride_h << "x" << stride_w << " pad " << pad_h << "x"
    << pad_w;
  return s.str();
}

void validate(const Conv2dShape& p) {
  DTRAIN_USAGE_CHECK(p.batch > 0 && p.in_channels > 0 && p.out_channels > 0 && p.in_h > 0 && p.in_w > 0)
      << "conv2d: empty shape (batch " << p.batch << ", channels " << p.in_channels << "->" << p.out_channels << ")";
  DTRAIN_USAGE_CHECK(p.kernel_h > 0 && p.kernel_w > 0 && p.stride_h > 0 && p.stride_w > 0 && p.pad_h >= 0 &&
                     p.pad_w >= 0)
      << "conv2d: kernel, stride must be positive and padding not negative";
  DTRAIN_USAGE_CHECK(p.in_h + 2 * p.pad_h >= p.kernel_h && p.in_w + 2 * p.pad_w >= p.kernel_w)
      << "conv2d: kernel " << p.kernel_h << "x" << p.kernel_w << " larger than the padded input " << p.in_h << "x"
      << p.in_w;
}

}  // namespace dtrain::models
