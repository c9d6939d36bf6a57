#pragma once
// Fully connected layer: y[b, o] = sum_i x[b, i] * w[o, i] + bias[o]  (w is [out, in], as PyTorch).
namespace dtrain::models::cpu {

template <typename T>
void linear_forward(int batch, int in_features, int out_features, const T* x, const T* w, const T* bias, T* y);
// dx = dy w; dw = dy^T x; dbias = column sums of dy (all overwritten).
template <typename T>
void linear_backward(int batch, int in_features, int out_features, const T* x, const T* w, const T* dy, T* dx, T* dw,
                     T* dbias);

}  // namespace dtrain::models::cpu
