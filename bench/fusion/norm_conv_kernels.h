#pragma once
// The unfused work the fused graph replaces, as today's step would queue it beside the plain
// convolution: the previous BN's apply (scale, bias, ReLU) over the convolution's input and the BN
// statistics (per-channel sum and sum of squares) over its output. Simple kernels of the probe's own
// (16-byte loads and stores, fp32 arithmetic), not models/cuda/batch_norm.h's: that one fuses
// statistics and apply into one call and has neither half on its own. Activations are NHWC of
// `rows` = N*H*W pixels by `channels`, a multiple of 8, 16-byte aligned. Work is queued on `stream`.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "bench/fusion/norm_conv_graph.h"

namespace dtrain::bench::fusion {

// y = max(x * scale[c] + bias[c], 0); scale and bias are of the activations' type.
void scale_bias_relu(cudaStream_t stream, Element element, const void* x, const void* scale, const void* bias, void* y,
                     int64_t rows, int channels);

// The fp32 scratch channel_sums needs, in floats.
size_t channel_sums_scratch_floats(int64_t rows, int channels);

// sum[c] and sqsum[c] of y over the rows: blocks of rows write fp32 partials, then one thread per
// channel adds them in double (deterministic, like the step's own statistics).
void channel_sums(cudaStream_t stream, Element element, const void* y, int64_t rows, int channels, float* partials,
                  float* sum, float* sqsum);

// count values uniform in [lo, hi), a hash of (seed, index), rounded to the element type.
void fill_uniform(cudaStream_t stream, Element element, void* data, int64_t count, uint64_t seed, float lo, float hi);

}  // namespace dtrain::bench::fusion
