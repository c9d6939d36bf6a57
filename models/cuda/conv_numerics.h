#pragma once
// The two numerics dtrain's GPU convolutions run in.
namespace dtrain::models::cuda {

enum class ConvNumerics {
  kFp32Nchw,  // fp32 tensors, NCHW activations, KCRS filters
  kBf16Nhwc,  // bf16 tensors, NHWC activations, KRSC filters, fp32 accumulation
};

}  // namespace dtrain::models::cuda
