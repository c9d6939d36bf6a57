// A two-layer perceptron written from scratch (forward, backward, SGD), trained data-parallel
// through dtrain's C ABI: every rank draws its share of each global batch, computes gradients on
// it, and averages them over the ranks with named all-reduces (one per parameter tensor, in flight
// together, which dtrain fuses). So N ranks with batch B each follow exactly the run of 1 rank with
// batch N x B, and the printed losses agree (the suite checks 1, 2 and 4 ranks).
//
//   mpirun -np 2 dtrain-mlp --batch-per-rank 8 --steps 50
#include <dtrain/dtrain.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kInputs = 8;
constexpr int kHidden = 32;

// Dies with dtrain's error text: the example has nothing to recover.
void check(int status, const char* what) {
  if (status == DTRAIN_OK) return;
  std::fprintf(stderr, "%s failed: %s (%s)\n", what, dtrain_last_error(), dtrain_status_name(status));
  std::exit(1);
}

// Deterministic pseudo-random numbers in [-1, 1) from an index, so every rank can draw any sample.
double noise(uint64_t index) {
  uint64_t x = index * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<double>(x >> 11) / static_cast<double>(1ull << 52) - 1.0;
}

// Sample i: x in [-1, 1)^8, y = sin(x0 + 2 x1) + x2 x3 (a target a small MLP can learn).
void sample(int64_t i, double* x, double* y) {
  for (int k = 0; k < kInputs; ++k) x[k] = noise(static_cast<uint64_t>(i) * kInputs + static_cast<uint64_t>(k));
  *y = std::sin(x[0] + 2 * x[1]) + x[2] * x[3];
}

// y = w2 . tanh(W1 x + b1) + b2. Each tensor its own buffer, as a framework would hold them.
struct Tensors {
  std::vector<double> w1 = std::vector<double>(kHidden * kInputs), b1 = std::vector<double>(kHidden),
                      w2 = std::vector<double>(kHidden), b2 = std::vector<double>(1);
  std::vector<std::vector<double>*> all() { return {&w1, &b1, &w2, &b2}; }
};
constexpr const char* kNames[] = {"w1", "b1", "w2", "b2"};

// Adds d(loss)/d(params) of one sample to `grad` (loss: half the squared error) and returns the loss.
double forward_backward(const Tensors& p, const double* x, double y, Tensors* grad) {
  double h[kHidden];
  double out = p.b2[0];
  for (int j = 0; j < kHidden; ++j) {
    double a = p.b1[j];
    for (int k = 0; k < kInputs; ++k) a += p.w1[j * kInputs + k] * x[k];
    h[j] = std::tanh(a);
    out += p.w2[j] * h[j];
  }
  const double err = out - y;
  grad->b2[0] += err;
  for (int j = 0; j < kHidden; ++j) {
    grad->w2[j] += err * h[j];
    const double da = err * p.w2[j] * (1 - h[j] * h[j]);
    grad->b1[j] += da;
    for (int k = 0; k < kInputs; ++k) grad->w1[j * kInputs + k] += da * x[k];
  }
  return 0.5 * err * err;
}

int64_t flag(int argc, char** argv, const char* name, int64_t fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atoll(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t batch = flag(argc, argv, "--batch-per-rank", 8);
  const int64_t steps = flag(argc, argv, "--steps", 50);
  const double lr = 0.05;
  check(dtrain_check_abi(DTRAIN_ABI_VERSION), "dtrain_check_abi");
  check(dtrain_init(), "dtrain_init");
  const int rank = dtrain_rank();
  const int size = dtrain_size();

  // Rank 0's initial weights everywhere (every rank draws the same here, but a real model's
  // initialization need not be deterministic).
  Tensors params;
  std::vector<std::vector<double>*> tensors = params.all();
  for (size_t t = 0; t < tensors.size(); ++t)
    for (size_t i = 0; i < tensors[t]->size(); ++i) (*tensors[t])[i] = 0.3 * noise(1000003 * (t + 1) + i + rank);
  for (size_t t = 0; t < tensors.size(); ++t) {
    dtrain_handle h = 0;
    check(dtrain_broadcast((std::string("init/") + kNames[t]).c_str(), tensors[t]->data(),
                           static_cast<int64_t>(tensors[t]->size()), DTRAIN_FLOAT64, 0, DTRAIN_HOST, nullptr, &h),
          "dtrain_broadcast");
    check(dtrain_wait(h), "dtrain_wait");
  }

  double loss = 0;
  for (int64_t step = 0; step < steps; ++step) {
    // This rank's slice of the global batch of size x batch samples.
    Tensors grad;
    double local_loss = 0;
    for (int64_t i = 0; i < batch; ++i) {
      double x[kInputs];
      double y = 0;
      sample((step * size + rank) * batch + i, x, &y);
      local_loss += forward_backward(params, x, y, &grad);
    }
    // Gradients as the mean over the global batch: each rank's sum scaled by 1/batch, averaged over
    // the ranks. The four tensors and the loss go out together; the wait comes after.
    std::vector<std::vector<double>*> grads = grad.all();
    dtrain_handle handles[5];
    for (size_t t = 0; t < grads.size(); ++t)
      check(dtrain_allreduce(kNames[t], grads[t]->data(), grads[t]->data(), static_cast<int64_t>(grads[t]->size()),
                             DTRAIN_FLOAT64, DTRAIN_AVERAGE, 1.0 / static_cast<double>(batch), 1.0, DTRAIN_HOST,
                             nullptr, &handles[t]),
            "dtrain_allreduce");
    check(dtrain_allreduce("loss", &local_loss, &loss, 1, DTRAIN_FLOAT64, DTRAIN_AVERAGE,
                           1.0 / static_cast<double>(batch), 1.0, DTRAIN_HOST, nullptr, &handles[4]),
          "dtrain_allreduce");
    for (dtrain_handle h : handles) check(dtrain_wait(h), "dtrain_wait");
    for (size_t t = 0; t < tensors.size(); ++t)
      for (size_t i = 0; i < tensors[t]->size(); ++i) (*tensors[t])[i] -= lr * (*grads[t])[i];
    if (rank == 0 && (step % 10 == 0 || step + 1 == steps))
      std::printf("step %lld loss %.12f\n", static_cast<long long>(step), loss);
  }
  if (rank == 0)
    std::printf("final loss %.15g after %lld steps of %d x %lld samples\n", loss, static_cast<long long>(steps), size,
                static_cast<long long>(batch));
  check(dtrain_shutdown(), "dtrain_shutdown");
  return 0;
}
