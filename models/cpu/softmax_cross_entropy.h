#pragma once
// Softmax cross-entropy over logits [batch, classes] with integer labels and optional label
// smoothing (target = (1 - eps) * one_hot + eps / classes). Returns the mean loss over the batch;
// the gradient is (softmax - target) / batch.
#include <cstdint>

namespace dtrain::models::cpu {

template <typename T>
double softmax_cross_entropy(int batch, int classes, const T* logits, const int32_t* labels, double smoothing,
                             T* dlogits);

}  // namespace dtrain::models::cpu
