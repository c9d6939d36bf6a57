#pragma once
// Element-wise layers: ReLU and the residual add.
#include <cstdint>

namespace dtrain::models::cpu {

template <typename T>
void relu_forward(const T* x, T* y, int64_t n);
// dx = dy where the forward output was positive (y > 0), else 0. In place (dx == dy) allowed.
template <typename T>
void relu_backward(const T* y, const T* dy, T* dx, int64_t n);

// y = a + b. Its backward passes dy unchanged to both inputs, so it needs no kernel.
template <typename T>
void residual_add_forward(const T* a, const T* b, T* y, int64_t n);

}  // namespace dtrain::models::cpu
