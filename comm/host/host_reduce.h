#pragma once
// Element-wise host kernels of the collectives. Reductions are done in fp32; 16-bit data is widened
// once on entry and rounded once on exit, so a reduction over any number of ranks rounds only once
// (add_scaled_16, for rings that carry 16-bit partial sums, rounds once per call).
// Loops are written so that the compiler vectorizes them (no aliasing between distinct arguments);
// bf16 conversions are inlined bit operations for that reason (fp16 calls runtime/memory/dtype.h).
#include <cstddef>

#include "runtime/memory/dtype.h"

namespace dtrain::comm {

// out[i] = (a[i] + b[i]) * scale. `out` may be `a` (in place); `b` must not overlap `out`.
void add_scaled(float* out, const float* a, const float* b, size_t n, float scale);

// out[i] = in[i] * scale (in place allowed).
void scale_copy(float* out, const float* in, size_t n, float scale);

// 16-bit: out[i] = round((float(a[i]) + float(b[i])) * scale) to `dtype` (bf16 or fp16), the sum
// in fp32. `out` may be `a`; `b` must not overlap `out`.
void add_scaled_16(void* out, const void* a, const void* b, runtime::DType dtype, size_t n, float scale);

// 16-bit or fp32 elements of `dtype` to fp32.
void widen_to_f32(const void* in, runtime::DType dtype, float* out, size_t n);

// fp32 x scale, rounded once to `dtype` (fp32, fp16 or bf16).
void narrow_from_f32(const float* in, float scale, void* out, runtime::DType dtype, size_t n);

}  // namespace dtrain::comm
