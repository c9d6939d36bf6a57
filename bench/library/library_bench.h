#pragma once
// dtrain-bench-library's measurements, each over the public C ABI (<dtrain/dtrain.h>) and MPI
// alone, as a user program would call them. Every call is checked: a bad status or a wrong
// element ends the run with the reason (a benchmark of wrong answers is no benchmark).
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::bench {

struct Options {
  int latency_calls = 1000;  // named 4-byte all-reduces per repetition, each submitted and waited
  int latency_reps = 10;
  std::vector<int64_t> sizes = {int64_t{1} << 20, int64_t{4} << 20, int64_t{16} << 20, int64_t{64} << 20};
  int warmup = 5;         // bandwidth: untimed calls per size and target
  int iters = 20;         // bandwidth: timed calls per size and target
  int fusion_ops = 1000;  // named 4-byte all-reduces submitted at once
  int fusion_reps = 10;
  std::vector<std::string> modes = {"latency", "bandwidth", "fusion"};
  std::string json;  // also write the results here
};

// Sorted samples' summary.
struct Summary {
  double median = 0;
  double p90 = 0;
  double min = 0;
  double max = 0;
};
Summary summarize(std::vector<double> samples);

struct LatencyResult {
  Summary per_call_us;      // a repetition's time / calls (the slowest rank), over repetitions
  Summary single_call_us;   // every single call on rank 0, over all repetitions
  int64_t collectives = 0;  // what all repetitions ran in (dtrain_fusion_stats)
  int64_t operations = 0;
};

struct BandwidthRow {
  std::string target;  // "dtrain-abi" or "mpi-allreduce"
  int64_t bytes = 0;
  bool in_place = false;
  double time_us = 0;  // mean over the timed calls, the slowest rank
  double algbw = 0;    // GB/s
  double busbw = 0;    // algbw x 2(n-1)/n
  int64_t wrong = 0;   // elements off the exact sum, over all ranks (checked on fresh inputs)
};

struct FusionResult {
  Summary time_us;         // submit all, then wait all (the slowest rank), over repetitions
  Summary collectives;     // per repetition
  int64_t operations = 0;  // per repetition (the same every time)
};

// Each collective over every rank of MPI_COMM_WORLD; dtrain must be initialized.
LatencyResult measure_latency(const Options& o);
std::vector<BandwidthRow> measure_bandwidth(int64_t bytes, const Options& o);
FusionResult measure_fusion(const Options& o);

// Ends the job with `what` and dtrain's text when `status` is not DTRAIN_OK.
void check_status(int status, const std::string& what);
// Ends the job with `what` unless `ok`.
void require(bool ok, const std::string& what);

// MPI_Wtime-like seconds of a steady clock.
double now_seconds();
// The largest of every rank's `value`.
double slowest(double value);

}  // namespace dtrain::bench
