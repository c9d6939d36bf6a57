// One-off check (not part of the build): runs every batch norm pass on fixed inputs for every
// vector width, dtype, layout and fusion, and writes every output's bytes to argv[1]. Built once
// against the batch_norm.cu before the restructuring and once after; the two files must be equal.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "models/batch_stats_reducer.h"
#include "models/cuda/batch_norm.h"
#include "runtime/memory/dtype.h"

using dtrain::models::BatchStatsReducer;
using dtrain::models::cuda::BatchNormDims;
using bf16 = dtrain::runtime::bfloat16;

#define CHECK(x)                                                                     \
  do {                                                                               \
    cudaError_t e = (x);                                                             \
    if (e != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

// A group of two whose other rank has the same batch: exercises the synchronized path.
class Mirror final : public BatchStatsReducer {
 public:
  int group_size() const override { return 2; }
  void all_gather(const double* mine, size_t count, double* all) override {
    std::memcpy(all, mine, count * sizeof(double));
    std::memcpy(all + count, mine, count * sizeof(double));
  }
};

uint64_t state = 12345;
double uniform(double lo, double hi) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (hi - lo) * static_cast<double>(state >> 11) / 9007199254740992.0;
}

template <typename T>
T to(double v) {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(v);
  } else {
    const float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits += 0x7fff + ((bits >> 16) & 1);
    bf16 b;
    const uint16_t half = static_cast<uint16_t>(bits >> 16);
    std::memcpy(&b, &half, 2);
    return b;
  }
}

struct Device {
  void* p = nullptr;
  size_t bytes = 0;
  explicit Device(size_t n) : bytes(n) {
    CHECK(cudaMalloc(&p, n + 64));
    CHECK(cudaMemset(p, 0, n + 64));
  }
  ~Device() { cudaFree(p); }
  template <typename T>
  T* at(size_t offset_elements = 0) {
    return reinterpret_cast<T*>(p) + offset_elements;
  }
};

FILE* out;
std::vector<uint64_t> sums;
void dump(const void* device, size_t bytes) {
  std::vector<unsigned char> host(bytes);
  CHECK(cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost));
  std::fwrite(host.data(), 1, bytes, out);
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : host) h = (h ^ c) * 1099511628211ull;
  sums.push_back(h);
}

template <typename T>
void run(int n, int c, int h, int w, bool nhwc, bool relu, bool residual, int misalign, bool sync) {
  const size_t count = size_t(n) * c * h * w;
  std::vector<T> x(count), dy(count), res(count);
  for (auto& v : x) v = to<T>(uniform(2, 4));
  for (auto& v : dy) v = to<T>(uniform(-1, 1));
  for (auto& v : res) v = to<T>(uniform(-1, 1));
  std::vector<float> gamma(c), beta(c), rmean(c), rvar(c);
  for (auto& v : gamma) v = static_cast<float>(uniform(0.5, 1.5));
  for (auto& v : beta) v = static_cast<float>(uniform(-0.5, 0.5));
  for (auto& v : rmean) v = static_cast<float>(uniform(-0.1, 0.1));
  for (auto& v : rvar) v = static_cast<float>(uniform(0.5, 1.5));
  const size_t bytes = count * sizeof(T);
  Device dx_(bytes), ddy(bytes), dres(bytes), dy_out(bytes), ddx(bytes), ddres(bytes), deval(bytes);
  Device dgamma(c * 4), dbeta(c * 4), drm(c * 4), drv(c * 4), dsm(c * 4 + 16), dsi(c * 4 + 16), dg(c * 4), db(c * 4);
  const size_t mask_bytes = dtrain::models::cuda::relu_mask_bytes(int64_t(count));
  Device mask(mask_bytes);
  const int m = misalign == 1 ? 1 : 0;  // elements: moves every activation off 16-byte alignment
  CHECK(cudaMemcpy(dx_.at<T>(m), x.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(ddy.at<T>(m), dy.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dres.at<T>(m), res.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dgamma.p, gamma.data(), c * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dbeta.p, beta.data(), c * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(drm.p, rmean.data(), c * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(drv.p, rvar.data(), c * 4, cudaMemcpyHostToDevice));
  BatchNormDims d;  // by member: the struct's layout changed with the restructuring
  d.batch = n, d.channels = c, d.spatial = int64_t(h) * w, d.channels_last = nhwc, d.eps = 1e-5, d.momentum = 0.1;
  Mirror mirror;
  BatchStatsReducer* group = sync ? &mirror : nullptr;
  uint8_t* relu_mask = relu ? mask.at<uint8_t>() : nullptr;
  // Statistics at an offset of 1 float when misaligned too (the 8-wide backward reads them 16 bytes at a time).
  float* saved_mean = dsm.at<float>(m ? 1 : 0);
  float* saved_inv_std = dsi.at<float>(m ? 1 : 0);
  dtrain::models::cuda::batch_norm_forward_train<T>(
      nullptr, d, dx_.at<T>(m), dgamma.at<float>(), dbeta.at<float>(), residual ? dres.at<T>(m) : nullptr, relu,
      dy_out.at<T>(m), saved_mean, saved_inv_std, drm.at<float>(), drv.at<float>(), relu_mask, group);
  dtrain::models::cuda::batch_norm_backward<T>(
      nullptr, d, dx_.at<T>(m), relu_mask, ddy.at<T>(m), dgamma.at<float>(), saved_mean, saved_inv_std, relu,
      ddx.at<T>(m), residual ? ddres.at<T>(m) : nullptr, dg.at<float>(), db.at<float>(), group);
  dtrain::models::cuda::batch_norm_forward_eval<T>(nullptr, d, dx_.at<T>(m), dgamma.at<float>(), dbeta.at<float>(),
                                                   drm.at<float>(), drv.at<float>(), residual ? dres.at<T>(m) : nullptr,
                                                   relu, deval.at<T>(m));
  CHECK(cudaDeviceSynchronize());
  const size_t first = sums.size();
  dump(dy_out.at<T>(m), bytes);
  if (relu) dump(mask.p, mask_bytes);
  dump(saved_mean, c * 4);
  dump(saved_inv_std, c * 4);
  dump(drm.p, c * 4);
  dump(drv.p, c * 4);
  dump(ddx.at<T>(m), bytes);
  if (residual) dump(ddres.at<T>(m), bytes);
  dump(dg.p, c * 4);
  dump(db.p, c * 4);
  dump(deval.at<T>(m), bytes);
  uint64_t hash = 0;
  for (size_t i = first; i < sums.size(); ++i) hash = hash * 31 + sums[i];
  std::printf("%s n%d c%d h%d w%d %s%s%s%s%s %016llx\n", std::is_same_v<T, float> ? "fp32" : "bf16", n, c, h, w,
              nhwc ? "nhwc" : "nchw", relu ? " relu" : "", residual ? " +res" : "", misalign ? " misaligned" : "",
              sync ? " sync" : "", static_cast<unsigned long long>(hash));
}

int main(int argc, char** argv) {
  out = std::fopen(argv[1], "wb");
  struct Shape {
    int n, c, h, w;
  };
  const std::vector<Shape> shapes = {{2, 3, 5, 7},      {4, 32, 6, 6},    {3, 45, 9, 11},    {8, 64, 28, 28},
                                     {1, 130, 3, 3},    {2, 264, 5, 5},   {3, 5, 4, 4},      {16, 256, 14, 14},
                                     {64, 104, 28, 28}, {32, 45, 27, 27}, {128, 64, 56, 56}, {256, 2048, 7, 7}};
  for (const Shape& s : shapes) {
    for (int flags = 0; flags < 4; ++flags) {
      const bool relu = flags & 1, residual = flags & 2;
      run<float>(s.n, s.c, s.h, s.w, false, relu, residual, 0, false);  // quad or generic NCHW
      run<bf16>(s.n, s.c, s.h, s.w, true, relu, residual, 0, false);    // 8-wide or generic NHWC
    }
    // The other layouts (generic only), the vector shapes off alignment (generic), synchronized BN.
    run<float>(s.n, s.c, s.h, s.w, true, true, true, 0, false);
    run<bf16>(s.n, s.c, s.h, s.w, false, true, true, 0, false);
    run<float>(s.n, s.c, s.h, s.w, false, true, true, 1, false);
    run<bf16>(s.n, s.c, s.h, s.w, true, true, true, 1, false);
    run<bf16>(s.n, s.c, s.h, s.w, true, true, true, 2, false);  // only the saved statistics off alignment
    run<float>(s.n, s.c, s.h, s.w, false, true, true, 0, true);
    run<bf16>(s.n, s.c, s.h, s.w, true, true, true, 0, true);
  }
  std::fclose(out);
  return 0;
}
