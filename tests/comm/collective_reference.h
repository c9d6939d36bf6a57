#pragma once
// Test support: random inputs that every rank can regenerate for every other rank, a float64
// reference of the collectives, and the tolerance each dtype allows.
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "runtime/memory/dtype.h"
#include "tests/support/test_seed.h"

namespace dtrain::test {

using runtime::DType;

// Values in [-1, 1] exactly representable in `dtype`, drawn from (seed, rank, stream).
inline std::vector<double> random_values(uint64_t seed, int rank, int stream, size_t n, DType dtype) {
  std::mt19937_64 rng(seed ^ (uint64_t(rank + 1) * 0x9E3779B97F4A7C15ull) ^ (uint64_t(stream) << 32));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<double> values(n);
  for (double& v : values) {
    const float f = dist(rng);
    if (dtype == DType::kBF16)
      v = runtime::to_float(runtime::to_bfloat16(f));
    else if (dtype == DType::kF16)
      v = runtime::to_float(runtime::to_float16(f));
    else
      v = f;
  }
  return values;
}

// Host bytes of `values` in `dtype` (exact: the values are representable).
inline std::vector<unsigned char> encode(const std::vector<double>& values, DType dtype) {
  std::vector<unsigned char> bytes(values.size() * runtime::dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    const float f = static_cast<float>(values[i]);
    if (dtype == DType::kF32) reinterpret_cast<float*>(bytes.data())[i] = f;
    if (dtype == DType::kBF16) reinterpret_cast<runtime::bfloat16*>(bytes.data())[i] = runtime::to_bfloat16(f);
    if (dtype == DType::kF16) reinterpret_cast<runtime::float16*>(bytes.data())[i] = runtime::to_float16(f);
  }
  return bytes;
}

inline double decode_one(const unsigned char* bytes, size_t i, DType dtype) {
  if (dtype == DType::kF32) return reinterpret_cast<const float*>(bytes)[i];
  if (dtype == DType::kBF16) return runtime::to_float(reinterpret_cast<const runtime::bfloat16*>(bytes)[i]);
  return runtime::to_float(reinterpret_cast<const runtime::float16*>(bytes)[i]);
}

// Allowed |got - exact| for a reduced element: fp32 accumulation error over the summands
// (1e-6 of their magnitude, the fp32 bound every backend is held to), plus half a unit in the last
// place of the 16-bit result (rounded once) for fp16 and bf16.
inline double tolerance(double exact, double magnitude_sum, DType dtype) {
  double tol = 1e-6 * magnitude_sum + 1e-30;
  if (dtype == DType::kF32) return tol;
  const int mantissa_bits = dtype == DType::kBF16 ? 7 : 10;
  const double a = std::fabs(exact);
  int exponent = a > 0 ? static_cast<int>(std::floor(std::log2(a))) : -126;
  if (dtype == DType::kF16) exponent = std::max(exponent, -14);  // subnormal spacing 2^-24
  return tol + 0.5 * std::ldexp(1.0, exponent - mantissa_bits);
}

inline uint64_t shared_seed(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  // Rank 0's seed, printed there, so a failure can be repeated with DTRAIN_TEST_SEED.
  uint64_t seed = rank == 0 ? dtrain::test::random_seed() : 0;
  MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, comm);
  return seed;
}

}  // namespace dtrain::test
