#include "comm/host/wide_reduction.h"

#include "comm/host/memory_ops.h"
#include "runtime/base/error.h"
#include "runtime/memory/buffer.h"

namespace dtrain::comm {

void reduce_widened(const WideInput& in, const std::function<Rounding(float* wide)>& reduce) {
  DTRAIN_CHECK(in.wide_count >= in.count) << "the fp32 copy is shorter than the input";
  runtime::Buffer owned;  // device: released once the rounding below is enqueued, as the stream allows
  float* wide = in.lent;
  if (wide == nullptr) {
    owned = scratch_buffer(in.wide_count * sizeof(float), in.where);
    wide = static_cast<float*>(owned.data());
  }
  widen_to_f32(in.data, in.dtype, wide, in.count, in.where);
  zero_bytes(wide + in.count, (in.wide_count - in.count) * sizeof(float), in.where);
  const Rounding part = reduce(wide);
  narrow_from_f32(part.from, in.scale, part.to, in.dtype, part.count, in.where);
}

}  // namespace dtrain::comm
