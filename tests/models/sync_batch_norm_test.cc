// Synchronized batch norm at the layer level (models/batch_stats_reducer.h), without MPI: the ranks
// of a group are threads of this process exchanging through an in-process BatchStatsReducer, each
// with its own BatchNorm2d replica and its slice of the group's batch. Checked against a float64
// reference computed here on the group's whole batch (seed printed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "models/batch_stats_reducer.h"
#include "models/cpu/batch_norm.h"
#include "models/layers.h"
#include "tests/support/test_seed.h"
#include "tests/support/thread_group_reducer.h"

namespace dtrain::models {
namespace {

using test::ThreadGroup;

// A group of one (bn_sync_group 1): it must never be called.
class LoneReducer final : public BatchStatsReducer {
 public:
  int group_size() const override { return 1; }
  void all_gather(const double*, size_t, double*) override { ++calls; }
  int calls = 0;
};

// The float64 reference: BN training forward and backward of the whole batch [n, c, s], straight
// from the definitions (PyTorch's semantics: biased variance to normalize, unbiased one for the
// running variance, momentum 0.1, eps 1e-5).
struct Reference {
  std::vector<double> y, dx, dgamma, dbeta, running_mean, running_var;
};
Reference reference(int n, int c, int s, const std::vector<double>& x, const std::vector<double>& dy,
                    const std::vector<double>& gamma, const std::vector<double>& beta) {
  Reference r;
  r.y.resize(x.size());
  r.dx.resize(x.size());
  for (int ch = 0; ch < c; ++ch) {
    auto at = [&](int i, int j) { return (size_t(i) * c + ch) * s + j; };
    const double m = double(n) * s;
    double mean = 0, var = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < s; ++j) mean += x[at(i, j)] / m;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < s; ++j) var += (x[at(i, j)] - mean) * (x[at(i, j)] - mean) / m;
    const double inv_std = 1 / std::sqrt(var + 1e-5);
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < s; ++j) {
        const double xhat = (x[at(i, j)] - mean) * inv_std;
        r.y[at(i, j)] = gamma[size_t(ch)] * xhat + beta[size_t(ch)];
        sum_dy += dy[at(i, j)];
        sum_dy_xhat += dy[at(i, j)] * xhat;
      }
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < s; ++j) {
        const double xhat = (x[at(i, j)] - mean) * inv_std;
        r.dx[at(i, j)] = gamma[size_t(ch)] * inv_std * (dy[at(i, j)] - sum_dy / m - xhat * sum_dy_xhat / m);
      }
    r.dgamma.push_back(sum_dy_xhat);
    r.dbeta.push_back(sum_dy);
    r.running_mean.push_back(0.1 * mean);
    r.running_var.push_back(0.9 + 0.1 * var * m / (m - 1));
  }
  return r;
}

std::vector<double> random_vector(std::mt19937_64& rng, size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& e : v) e = dist(rng);
  return v;
}

// One rank's BN layer and its slice [first, first + batch) of the group's batch.
struct Replica {
  ParameterSet params;
  std::unique_ptr<BatchNorm2d> norm;
  runtime::Tensor x, dy;
  std::vector<float> y, dx;  // the training forward's output and the backward's dx
};

void make_replica(Replica& r, int channels, int spatial_h, int spatial_w, int first, int batch,
                  const std::vector<double>& x, const std::vector<double>& dy, const std::vector<double>& gamma,
                  const std::vector<double>& beta) {
  r.norm = std::make_unique<BatchNorm2d>(r.params, "bn", channels);
  r.params.finalize();
  std::mt19937_64 unused;
  r.norm->initialize(r.params, unused);
  const BatchNorm2d::Slots slots = BatchNorm2d::find(r.params, "bn");
  for (int c = 0; c < channels; ++c) {
    r.params.param(slots.gamma)[c] = static_cast<float>(gamma[size_t(c)]);
    r.params.param(slots.beta)[c] = static_cast<float>(beta[size_t(c)]);
  }
  r.x = runtime::Tensor(runtime::DType::kF32, {batch, channels, spatial_h, spatial_w});
  r.dy = runtime::Tensor(runtime::DType::kF32, {batch, channels, spatial_h, spatial_w});
  const size_t per_sample = size_t(channels) * spatial_h * spatial_w;
  for (size_t i = 0; i < size_t(batch) * per_sample; ++i) {
    r.x.data<float>()[i] = static_cast<float>(x[size_t(first) * per_sample + i]);
    r.dy.data<float>()[i] = static_cast<float>(dy[size_t(first) * per_sample + i]);
  }
}

// |a - b| <= tolerance * max(1, |b|).
void expect_close(const char* what, int rank, size_t i, double a, double b, double tolerance) {
  EXPECT_LE(std::fabs(a - b), tolerance * std::max(1.0, std::fabs(b)))
      << what << "[" << i << "] on rank " << rank << ": " << a << " vs float64 reference " << b;
}

// Ranks with uneven batches (the merge weighs by count) train one BN layer in sync; each rank's
// output, dx and running statistics, and the group's summed dgamma / dbeta, match the reference
// on the group's whole batch. Inputs carry a per-channel offset (10 to 30, std 0.58).
// Tolerance: the statistics are exact to double rounding, but the layer applies them in float32
// as y = x * scale + shift with |x * scale| up to ~80, where one float32 ulp is 7.6e-6; 1e-4
// relative (absolute below 1) covers a few such roundings, and a rank normalizing with its own
// batch's statistics instead of the group's is off by ~1e-1.
constexpr double kTolerance = 1e-4;

TEST(SyncBatchNorm, GroupOfThreadsMatchesFloat64ReferenceOnTheGroupsBatch) {
  std::mt19937_64 rng(test::random_seed());
  const int channels = 3, h = 2, w = 3, spatial = h * w;
  for (const std::vector<int>& batches : {std::vector<int>{2, 2}, std::vector<int>{3, 1, 4}}) {
    const int group = static_cast<int>(batches.size());
    int total = 0;
    for (int b : batches) total += b;
    std::vector<double> x = random_vector(rng, size_t(total) * channels * spatial, -1, 1);
    for (size_t i = 0; i < x.size(); ++i) x[i] += 10.0 * (1 + static_cast<double>(i / spatial % channels));
    const std::vector<double> dy = random_vector(rng, x.size(), -1, 1);
    const std::vector<double> gamma = random_vector(rng, channels, 0.5, 1.5);
    const std::vector<double> beta = random_vector(rng, channels, -0.5, 0.5);
    // The reference sees the inputs as the layer does: rounded to float32.
    std::vector<double> xf(x.size()), dyf(dy.size());
    for (size_t i = 0; i < x.size(); ++i) xf[i] = static_cast<float>(x[i]), dyf[i] = static_cast<float>(dy[i]);
    std::vector<double> gf(gamma.size()), bf(beta.size());
    for (size_t i = 0; i < gamma.size(); ++i) gf[i] = static_cast<float>(gamma[i]), bf[i] = static_cast<float>(beta[i]);
    const Reference ref = reference(total, channels, spatial, xf, dyf, gf, bf);

    ThreadGroup threads(group);
    std::vector<Replica> replicas(static_cast<size_t>(group));
    std::vector<std::unique_ptr<ThreadGroup::Member>> members;
    int first = 0;
    std::vector<int> firsts;
    for (int r = 0; r < group; ++r) {
      make_replica(replicas[size_t(r)], channels, h, w, first, batches[size_t(r)], x, dy, gamma, beta);
      members.push_back(std::make_unique<ThreadGroup::Member>(threads, r));
      replicas[size_t(r)].norm->set_batch_stats_reducer(members.back().get());
      firsts.push_back(first);
      first += batches[size_t(r)];
    }
    std::vector<std::thread> running;
    for (int r = 0; r < group; ++r) {
      running.emplace_back([&replicas, r] {
        Replica& rep = replicas[size_t(r)];
        const runtime::Tensor& y = rep.norm->forward(rep.x, true);
        rep.y.assign(y.data<float>(), y.data<float>() + y.numel());
        const runtime::Tensor& dx = rep.norm->backward(rep.dy);
        rep.dx.assign(dx.data<float>(), dx.data<float>() + dx.numel());
      });
    }
    for (std::thread& t : running) t.join();

    const size_t per_sample = size_t(channels) * spatial;
    std::vector<double> dgamma(channels, 0.0), dbeta(channels, 0.0);
    for (int r = 0; r < group; ++r) {
      Replica& rep = replicas[size_t(r)];
      EXPECT_EQ(members[size_t(r)]->calls, 2) << "one exchange in forward, one in backward";
      const BatchNorm2d::Slots slots = BatchNorm2d::find(rep.params, "bn");
      const size_t offset = size_t(firsts[size_t(r)]) * per_sample;
      for (size_t i = 0; i < rep.y.size(); ++i) {
        expect_close("y", r, i, rep.y[i], ref.y[offset + i], kTolerance);
        expect_close("dx", r, i, rep.dx[i], ref.dx[offset + i], kTolerance);
      }
      for (int c = 0; c < channels; ++c) {
        expect_close("running_mean", r, size_t(c), rep.params.state(slots.running_mean)[c], ref.running_mean[size_t(c)],
                     kTolerance);
        expect_close("running_var", r, size_t(c), rep.params.state(slots.running_var)[c], ref.running_var[size_t(c)],
                     kTolerance);
        dgamma[size_t(c)] += rep.params.grad(slots.gamma)[c];
        dbeta[size_t(c)] += rep.params.grad(slots.beta)[c];
      }
      // Every replica of the group holds the same running statistics, bit for bit.
      Replica& first_rep = replicas[0];
      for (int c = 0; c < channels; ++c) {
        EXPECT_EQ(rep.params.state(slots.running_mean)[c], first_rep.params.state(slots.running_mean)[c]);
        EXPECT_EQ(rep.params.state(slots.running_var)[c], first_rep.params.state(slots.running_var)[c]);
      }
      rep.norm->forward(rep.x, false);  // evaluation: the running statistics, no exchange
      EXPECT_EQ(members[size_t(r)]->calls, 2) << "evaluation exchanges nothing";
    }
    for (int c = 0; c < channels; ++c) {
      expect_close("group dgamma", -1, size_t(c), dgamma[size_t(c)], ref.dgamma[size_t(c)], kTolerance);
      expect_close("group dbeta", -1, size_t(c), dbeta[size_t(c)], ref.dbeta[size_t(c)], kTolerance);
    }
  }
}

// The merge itself, in double: moments of uneven slices merged over a group equal the two-pass
// moments of the whole, to 1e-11 relative, even with a mean 1e4 times the spread of the values.
// (Adding the ranks' sums of squares, E[x^2] - E[x]^2, would keep only ~8 of the 16 digits of the
// variance there.) Not tighter: a value near 1e4 is itself only known to 1.8e-12 (its ulp), so the
// merge and the reference, which subtract different means, differ by up to ~2e-12 relative in m2
// (seed 8624177675091328051 gives 1.5e-12).
TEST(SyncBatchNorm, MergedMomentsEqualTheWholeBatchsWithoutCancellation) {
  std::mt19937_64 rng(test::random_seed());
  const int channels = 2, spatial = 5;
  const std::vector<int> batches{4, 1, 7};
  int total = 0;
  for (int b : batches) total += b;
  std::vector<double> x = random_vector(rng, size_t(total) * channels * spatial, -1, 1);
  for (double& v : x) v += 1e4;
  std::vector<double> whole_mean(channels), whole_m2(channels);
  cpu::batch_norm_moments(cpu::BatchNormShape{total, channels, spatial}, x.data(), whole_mean.data(), whole_m2.data());

  ThreadGroup threads(static_cast<int>(batches.size()));
  std::vector<std::vector<double>> mean(batches.size(), std::vector<double>(channels)), m2 = mean;
  std::vector<int64_t> counts(batches.size());
  std::vector<std::thread> running;
  int first = 0;
  for (size_t r = 0; r < batches.size(); ++r) {
    running.emplace_back([&, r, first] {
      ThreadGroup::Member member(threads, static_cast<int>(r));
      const double* slice = x.data() + size_t(first) * channels * spatial;
      cpu::batch_norm_moments(cpu::BatchNormShape{batches[r], channels, spatial}, slice, mean[r].data(), m2[r].data());
      counts[r] =
          merge_moments_over_group(member, channels, int64_t{batches[r]} * spatial, mean[r].data(), m2[r].data());
    });
    first += batches[r];
  }
  for (std::thread& t : running) t.join();
  for (size_t r = 0; r < batches.size(); ++r) {
    EXPECT_EQ(counts[r], int64_t{total} * spatial);
    for (size_t c = 0; c < size_t(channels); ++c) {
      EXPECT_NEAR(mean[r][c], whole_mean[c], 1e-11 * std::fabs(whole_mean[c])) << "rank " << r << " channel " << c;
      EXPECT_NEAR(m2[r][c], whole_m2[c], 1e-11 * whole_m2[c]) << "rank " << r << " channel " << c;
      EXPECT_EQ(mean[r][c], mean[0][c]) << "every rank merges in the same order: the same bits";
      EXPECT_EQ(m2[r][c], m2[0][c]);
    }
  }
}

// bn_sync_group 1: a reducer of a group of one is never called, and the layer computes exactly
// what it computes without one.
TEST(SyncBatchNorm, GroupOfOneExchangesNothingAndChangesNothing) {
  std::mt19937_64 rng(test::random_seed());
  const int channels = 4, batch = 3;
  const std::vector<double> x = random_vector(rng, size_t(batch) * channels * 6, -2, 3);
  const std::vector<double> dy = random_vector(rng, x.size(), -1, 1);
  const std::vector<double> gamma = random_vector(rng, channels, 0.5, 1.5);
  const std::vector<double> beta = random_vector(rng, channels, -0.5, 0.5);
  Replica plain, lone;
  make_replica(plain, channels, 2, 3, 0, batch, x, dy, gamma, beta);
  make_replica(lone, channels, 2, 3, 0, batch, x, dy, gamma, beta);
  LoneReducer reducer;
  lone.norm->set_batch_stats_reducer(&reducer);
  for (Replica* r : {&plain, &lone}) {
    const runtime::Tensor& y = r->norm->forward(r->x, true);
    r->y.assign(y.data<float>(), y.data<float>() + y.numel());
    const runtime::Tensor& dx = r->norm->backward(r->dy);
    r->dx.assign(dx.data<float>(), dx.data<float>() + dx.numel());
  }
  EXPECT_EQ(reducer.calls, 0);
  EXPECT_EQ(plain.y, lone.y);
  EXPECT_EQ(plain.dx, lone.dx);
  const int64_t flat = plain.params.flat_size();
  EXPECT_TRUE(std::equal(plain.params.grads_flat(), plain.params.grads_flat() + flat, lone.params.grads_flat()));
  EXPECT_TRUE(std::equal(plain.params.state_flat(), plain.params.state_flat() + plain.params.state_count(),
                         lone.params.state_flat()));
}

}  // namespace
}  // namespace dtrain::models
