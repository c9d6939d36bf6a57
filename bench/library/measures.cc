// The three measurements of dtrain-bench-library (library_bench.h), over the C ABI and MPI.
#include <dtrain/dtrain.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "bench/library/library_bench.h"

namespace dtrain::bench {
namespace {

int world_rank() {
  return dtrain_rank();
}
int world_size() {
  return dtrain_size();
}

// A 4-byte operand whose sum over ranks is exact in fp32, and that sum.
float small_operand(int rank, int i) {
  return static_cast<float>(rank + 1 + i % 5);
}
float small_sum(int size, int i) {
  return static_cast<float>(size * (size + 1) / 2 + size * (i % 5));
}

void fusion_stats(int64_t* operations, int64_t* collectives) {
  check_status(dtrain_fusion_stats(operations, collectives), "dtrain_fusion_stats");
}

// One named 4-byte all-reduce, submitted and waited.
void small_allreduce(const std::string& name, const float* in, float* out) {
  dtrain_handle h = 0;
  check_status(
      dtrain_allreduce(name.c_str(), in, out, 1, DTRAIN_FLOAT32, DTRAIN_SUM, 1.0, 1.0, DTRAIN_HOST, nullptr, &h),
      "dtrain_allreduce '" + name + "'");
  check_status(dtrain_wait(h), "dtrain_wait '" + name + "'");
}

std::vector<std::string> numbered(const char* prefix, int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(std::string(prefix) + std::to_string(i));
  return names;
}

// Small integers, so every sum is exact in fp32.
float pattern(int rank, int64_t i) {
  return static_cast<float>(static_cast<int>((rank * 7 + i) % 11) - 5);
}
void fill(std::vector<float>& v, int rank) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = pattern(rank, static_cast<int64_t>(i));
}
int64_t count_wrong(const std::vector<float>& got, int size) {
  int64_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    float sum = 0;
    for (int r = 0; r < size; ++r) sum += pattern(r, static_cast<int64_t>(i));
    wrong += got[i] != sum ? 1 : 0;
  }
  return wrong;
}

// One all-reduce of `count` fp32 over the target named, to completion.
void big_allreduce(bool abi, const float* send, float* recv, int64_t count) {
  if (!abi) {
    require(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD) == MPI_SUCCESS,
            "MPI_Allreduce");
    return;
  }
  dtrain_handle h = 0;
  check_status(
      dtrain_allreduce("bandwidth", send, recv, count, DTRAIN_FLOAT32, DTRAIN_SUM, 1.0, 1.0, DTRAIN_HOST, nullptr, &h),
      "dtrain_allreduce 'bandwidth'");
  check_status(dtrain_wait(h), "dtrain_wait 'bandwidth'");
}

BandwidthRow bandwidth_row(bool abi, bool in_place, std::vector<float>& send, std::vector<float>& recv,
                           const Options& o) {
  const int rank = world_rank();
  const int size = world_size();
  const auto count = static_cast<int64_t>(recv.size());
  const float* in = in_place ? recv.data() : send.data();
  fill(send, rank);
  fill(recv, rank);
  for (int i = 0; i < o.warmup; ++i) big_allreduce(abi, in, recv.data(), count);
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = now_seconds();
  for (int i = 0; i < o.iters; ++i) big_allreduce(abi, in, recv.data(), count);
  const double seconds = slowest((now_seconds() - start) / o.iters);
  // One more on fresh inputs, checked element by element.
  fill(send, rank);
  fill(recv, rank);
  big_allreduce(abi, in, recv.data(), count);
  int64_t wrong = count_wrong(recv, size);
  MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);

  BandwidthRow row;
  row.target = abi ? "dtrain-abi" : "mpi-allreduce";
  row.bytes = count * static_cast<int64_t>(sizeof(float));
  row.in_place = in_place;
  row.time_us = seconds * 1e6;
  row.algbw = seconds > 0 ? static_cast<double>(row.bytes) / seconds / 1e9 : 0;
  row.busbw = row.algbw * (size > 1 ? 2.0 * (size - 1) / size : 0.0);
  row.wrong = wrong;
  return row;
}

}  // namespace

Summary summarize(std::vector<double> samples) {
  Summary s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  s.median = n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  // Nearest rank: the smallest sample at or above 90% of them.
  s.p90 = samples[static_cast<size_t>(std::ceil(0.9 * static_cast<double>(n))) - 1];
  s.min = samples.front();
  s.max = samples.back();
  return s;
}

void check_status(int status, const std::string& what) {
  if (status == DTRAIN_OK) return;
  std::fprintf(stderr, "dtrain-bench-library: rank %d: %s failed: %s: %s\n", dtrain_rank(), what.c_str(),
               dtrain_status_name(status), dtrain_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

void require(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "dtrain-bench-library: rank %d: %s\n", dtrain_rank(), what.c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double slowest(double value) {
  MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return value;
}

// Repetition -1 is a warm-up (the names' first use), not reported.
LatencyResult measure_latency(const Options& o) {
  const int rank = world_rank();
  const int size = world_size();
  const std::vector<std::string> names = numbered("latency/", o.latency_calls);
  std::vector<double> per_call;
  std::vector<double> single;
  int64_t operations0 = 0;
  int64_t collectives0 = 0;
  for (int rep = -1; rep < o.latency_reps; ++rep) {
    if (rep == 0) fusion_stats(&operations0, &collectives0);
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = now_seconds();
    for (int i = 0; i < o.latency_calls; ++i) {
      const float in = small_operand(rank, i);
      float out = 0;
      const double call_start = now_seconds();
      small_allreduce(names[static_cast<size_t>(i)], &in, &out);
      if (rep >= 0) single.push_back((now_seconds() - call_start) * 1e6);
      require(out == small_sum(size, i), "latency: '" + names[static_cast<size_t>(i)] + "' gave " +
                                             std::to_string(out) + ", expected " + std::to_string(small_sum(size, i)));
    }
    const double elapsed = slowest(now_seconds() - start);
    if (rep >= 0) per_call.push_back(elapsed / o.latency_calls * 1e6);
  }
  LatencyResult result;
  fusion_stats(&result.operations, &result.collectives);
  result.operations -= operations0;
  result.collectives -= collectives0;
  result.per_call_us = summarize(per_call);
  result.single_call_us = summarize(single);
  return result;
}

std::vector<BandwidthRow> measure_bandwidth(int64_t bytes, const Options& o) {
  const auto count = static_cast<size_t>(bytes / static_cast<int64_t>(sizeof(float)));
  std::vector<float> send(count);
  std::vector<float> recv(count);
  std::vector<BandwidthRow> rows;
  // The ABI and its peer alternate, so a change in the machine's load hits both.
  for (bool in_place : {false, true}) {
    rows.push_back(bandwidth_row(true, in_place, send, recv, o));
    rows.push_back(bandwidth_row(false, in_place, send, recv, o));
  }
  return rows;
}

FusionResult measure_fusion(const Options& o) {
  const int rank = world_rank();
  const int size = world_size();
  const auto n = static_cast<size_t>(o.fusion_ops);
  const std::vector<std::string> names = numbered("fusion/", o.fusion_ops);
  std::vector<float> in(n);
  std::vector<float> out(n);
  std::vector<dtrain_handle> handles(n);
  std::vector<double> times;
  std::vector<double> collectives;
  FusionResult result;
  for (int rep = -1; rep < o.fusion_reps; ++rep) {
    for (size_t i = 0; i < n; ++i) in[i] = small_operand(rank, static_cast<int>(i));
    std::fill(out.begin(), out.end(), 0.0f);
    int64_t operations0 = 0;
    int64_t collectives0 = 0;
    fusion_stats(&operations0, &collectives0);
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = now_seconds();
    for (size_t i = 0; i < n; ++i) {
      check_status(dtrain_allreduce(names[i].c_str(), &in[i], &out[i], 1, DTRAIN_FLOAT32, DTRAIN_SUM, 1.0, 1.0,
                                    DTRAIN_HOST, nullptr, &handles[i]),
                   "dtrain_allreduce '" + names[i] + "'");
    }
    for (size_t i = 0; i < n; ++i) check_status(dtrain_wait(handles[i]), "dtrain_wait '" + names[i] + "'");
    const double elapsed = slowest(now_seconds() - start);
    int64_t operations1 = 0;
    int64_t collectives1 = 0;
    fusion_stats(&operations1, &collectives1);
    for (size_t i = 0; i < n; ++i)
      require(out[i] == small_sum(size, static_cast<int>(i)), "fusion: '" + names[i] + "' gave " +
                                                                  std::to_string(out[i]) + ", expected " +
                                                                  std::to_string(small_sum(size, static_cast<int>(i))));
    if (rep < 0) continue;
    times.push_back(elapsed * 1e6);
    collectives.push_back(static_cast<double>(collectives1 - collectives0));
    result.operations = operations1 - operations0;
  }
  result.time_us = summarize(times);
  result.collectives = summarize(collectives);
  return result;
}

}  // namespace dtrain::bench
