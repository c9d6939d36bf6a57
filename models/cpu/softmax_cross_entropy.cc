#include "models/cpu/softmax_cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "runtime/base/error.h"

namespace dtrain::models::cpu {

template <typename T>
double softmax_cross_entropy(int batch, int classes, const T* logits, const int32_t* labels, double smoothing,
                             T* dlogits) {
  DTRAIN_USAGE_CHECK(smoothing >= 0 && smoothing < 1) << "label smoothing " << smoothing << " outside [0, 1)";
  double total = 0;
  for (int b = 0; b < batch; ++b) {
    const T* z = logits + static_cast<long>(b) * classes;
    const int32_t label = labels[b];
    DTRAIN_USAGE_CHECK(label >= 0 && label < classes)
        << "label " << label << " of sample " << b << " outside [0, " << classes << ")";
    // log-sum-exp around the maximum, in double.
    const double max = *std::max_element(z, z + classes);
    double sum = 0;
    for (int j = 0; j < classes; ++j) sum += std::exp(z[j] - max);
    const double log_sum = max + std::log(sum);
    const double off = smoothing / classes;
    const double on = 1.0 - smoothing + off;
    double loss = 0;
    for (int j = 0; j < classes; ++j) {
      const double target = j == label ? on : off;
      const double log_p = z[j] - log_sum;
      loss -= target * log_p;
      if (dlogits != nullptr)
        dlogits[static_cast<long>(b) * classes + j] = static_cast<T>((std::exp(log_p) - target) / batch);
    }
    total += loss;
  }
  return total / batch;
}

template double softmax_cross_entropy<float>(int, int, const float*, const int32_t*, double, float*);
template double softmax_cross_entropy<double>(int, int, const double*, const int32_t*, double, double*);

}  // namespace dtrain::models::cpu
