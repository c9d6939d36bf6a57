#include "train/engine/gradient_accumulation.h"

#include "runtime/base/error.h"

namespace dtrain::train {

void check_micro_batch(const MicroBatch& m) {
  DTRAIN_CHECK(m.count >= 1 && m.index >= 0 && m.index < m.count)
      << "micro-batch " << m.index << " of " << m.count << " per optimizer step";
}

void accumulate_gradient_range(const MicroBatch& m, float* grads, float* sum, size_t n) {
  if (m.count == 1) return;
  if (m.index == 0) {
    for (size_t i = 0; i < n; ++i) sum[i] = grads[i];
  } else if (!m.last()) {
    for (size_t i = 0; i < n; ++i) sum[i] += grads[i];
  } else {
    // Divided, not multiplied by 1/K: the mean of K equal gradients is then exactly that gradient.
    const float k = static_cast<float>(m.count);
    for (size_t i = 0; i < n; ++i) grads[i] = (grads[i] + sum[i]) / k;
  }
}

}  // namespace dtrain::train
