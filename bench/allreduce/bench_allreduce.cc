// dtrain-bench-allreduce: all-reduce bandwidth and latency, in the format of nccl-tests.
//
//   mpirun -np 4 build/bin/dtrain-bench-allreduce -b 8 -e 64M -f 2 --backend mpi-ring
//
// For each size it times out-of-place and in-place all-reduces (median-free: mean of -n iterations
// after -w warm-up iterations, the slowest rank's time, as nccl-tests reports), then runs one more
// on known inputs and counts the elements that differ from the exact expected values on any rank.
//   algbw = bytes / time
//   busbw = algbw x 2(n-1)/n   (the bytes each rank's link carries in a bandwidth-optimal all-reduce,
//                               so busbw is comparable across world sizes; nccl-tests' definition)
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/allreduce/target.h"
#include "bench/common/result_file.h"
#include "comm/host/host_reduce.h"
#include "runtime/base/cli.h"
#include "runtime/base/error.h"
#include "runtime/base/process_identity.h"
#include "runtime/io/atomic_file.h"
#include "runtime/io/json.h"
#include "runtime/mpi/main_guard.h"
#include "runtime/mpi/mpi_check.h"
#include "runtime/rank/gpu_binding.h"
#include "runtime/rank/rank_bootstrap.h"
#include "runtime/rank/rank_context.h"

namespace dtrain::bench {
namespace {

using comm::DType;
using comm::ReduceOp;

struct Options {
  size_t min_bytes = 8;
  size_t max_bytes = size_t{64} << 20;
  double factor = 2;
  int warmup = 5;
  int iters = 20;
  DType dtype = DType::kF32;
  std::string backend = "auto";
  ReduceOp op = ReduceOp::kSum;
  comm::SixteenBitSum sum16 = comm::SixteenBitSum::kFp32;
  std::string json;
  bool check_calls = false;
  bool allow_gpu_sharing = false;
};

// "64M", "1G", "8K", "4096".
constexpr double kMaxBufferBytes = double(size_t{16} << 30);

size_t parse_bytes(const std::string& text, const char* flag) {
  size_t end = 0;
  double value = 0;
  try {
    value = std::stod(text, &end);
  } catch (...) {
    DTRAIN_USAGE_FAIL() << flag << " '" << text << "' is not a size (e.g. 8, 4K, 64M, 1G)";
  }
  const std::string suffix = text.substr(end);
  double unit = 1;
  if (suffix == "K" || suffix == "k")
    unit = 1024;
  else if (suffix == "M" || suffix == "m")
    unit = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g")
    unit = 1024.0 * 1024 * 1024;
  else
    DTRAIN_USAGE_CHECK(suffix.empty()) << flag << " '" << text << "' has an unknown unit (use K, M or G)";
  DTRAIN_USAGE_CHECK(std::isfinite(value) && value > 0) << flag << " '" << text << "' must be a positive size";
  // Three buffers of the largest size live at once (send, receive, reference).
  DTRAIN_USAGE_CHECK(value * unit <= kMaxBufferBytes)
      << flag << " '" << text << "' is over the largest buffer this benchmark allocates ("
      << kMaxBufferBytes / (1 << 30) << " GiB)";
  return static_cast<size_t>(value * unit);
}

Options parse(int argc, char** argv, bool* help) {
  runtime::po::options_description desc("dtrain-bench-allreduce options (as nccl-tests)");
  std::string min_b, max_b, dtype = "fp32", op = "sum", sum16 = "fp32";
  Options o;
  desc.add_options()("minbytes,b", runtime::po::value(&min_b)->default_value("8"),
                     "smallest size in bytes (K, M, G suffixes)")(
      "maxbytes,e", runtime::po::value(&max_b)->default_value("64M"), "largest size in bytes")(
      "stepfactor,f", runtime::po::value(&o.factor)->default_value(2), "multiply the size by this each row")(
      "warmup-iters,w", runtime::po::value(&o.warmup)->default_value(5), "untimed iterations per size")(
      "iters", runtime::po::value(&o.iters)->default_value(20), "timed iterations per size")(
      "datatype,d", runtime::po::value(&dtype)->default_value("fp32"), "fp32, fp16 or bf16")(
      "backend", runtime::po::value(&o.backend)->default_value("auto"),
      "auto, mpi-ring, mpi, nccl, hierarchical, or the raw peers raw-mpi / raw-nccl")(
      "op", runtime::po::value(&op)->default_value("sum"), "sum or avg")(
      "sixteen-bit-sum", runtime::po::value(&sum16)->default_value("fp32"),
      "fp16/bf16: fp32 (widened, one rounding) or native (NCCL's 16-bit reduction; the nccl backend only)")(
      "metrics-file", runtime::po::value(&o.json), "also write the results to this JSON file")(
      "check-calls", runtime::po::value(&o.check_calls)->default_value(false),
      "keep dtrain's per-call consistency check on (off: nccl-tests has none)")(
      "allow-gpu-sharing", runtime::switch_value(), "allow several ranks per GPU");
  const runtime::ParsedCommandLine cli = runtime::parse_command_line(argc, argv, desc);
  *help = cli.help;
  if (cli.help) {
    if (runtime::is_world_rank_zero()) std::cout << runtime::usage("dtrain-bench-allreduce", desc);
    return o;
  }
  o.allow_gpu_sharing = runtime::switch_on(cli.values, "allow-gpu-sharing");
  o.min_bytes = parse_bytes(min_b, "-b");
  o.max_bytes = parse_bytes(max_b, "-e");
  o.dtype = runtime::parse_dtype(dtype, "-d");
  DTRAIN_USAGE_CHECK(comm::is_supported_dtype(o.dtype)) << "-d " << dtype << ": use fp32, fp16 or bf16";
  DTRAIN_USAGE_CHECK(op == "sum" || op == "avg") << "--op '" << op << "': use sum or avg";
  o.op = op == "sum" ? ReduceOp::kSum : ReduceOp::kAverage;
  o.sum16 = comm::parse_sixteen_bit_sum(sum16, "--sixteen-bit-sum");
  DTRAIN_USAGE_CHECK(o.factor > 1) << "-f must be greater than 1";
  DTRAIN_USAGE_CHECK(o.iters > 0 && o.warmup >= 0) << "--iters must be positive and -w not negative";
  DTRAIN_USAGE_CHECK(o.min_bytes <= o.max_bytes) << "-b must not exceed -e";
  // Host buffers: the three copies of the largest size must fit in this machine's memory.
  const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  DTRAIN_USAGE_CHECK(physical <= 0 || 3.0 * static_cast<double>(o.max_bytes) < physical)
      << "-e " << max_b << ": three buffers of it (" << 3.0 * static_cast<double>(o.max_bytes) / (1 << 30)
      << " GiB) do not fit in this host's " << physical / (1 << 30) << " GiB of memory";
  return o;
}

// Small integers, so every sum is exact in every dtype.
float pattern(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((rank * 7 + i) % 11) - 5);
}

struct Row {
  size_t bytes;
  size_t count;
  bool in_place;
  double time_us;
  double algbw;
  double busbw;
  long long wrong;
};

class Bench {
 public:
  Bench(const Options& o, AllReduceTarget& target, const runtime::RankContext& ctx)
      : o_(o), target_(target), ctx_(ctx) {
    rank_ = ctx.topology().world_rank;
    size_ = ctx.topology().world_size;
  }

  Row measure(size_t count, bool in_place) {
    const size_t esize = runtime::dtype_size(o_.dtype);
    const size_t bytes = count * esize;
    Buffers b = buffers(bytes);
    fill(b.send, count);
    if (in_place) fill(b.recv, count);
    void* recv = b.recv;
    const void* send = in_place ? recv : b.send;

    for (int i = 0; i < o_.warmup; ++i) target_.run(send, recv, count, o_.dtype, o_.op);
    target_.synchronize();
    DTRAIN_MPI_CHECK(MPI_Barrier(ctx_.world()));
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.iters; ++i) target_.run(send, recv, count, o_.dtype, o_.op);
    target_.synchronize();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / o_.iters;
    DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, ctx_.world()));

    // One more on fresh inputs, checked element by element.
    fill(b.send, count);
    if (in_place) fill(b.recv, count);
    target_.run(send, recv, count, o_.dtype, o_.op);
    target_.synchronize();
    long long wrong = count_wrong(recv, count);
    DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, ctx_.world()));

    Row row{bytes, count, in_place, seconds * 1e6, 0, 0, wrong};
    row.algbw = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
    row.busbw = row.algbw * (size_ > 1 ? 2.0 * (size_ - 1) / size_ : 0.0);
    return row;
  }

 private:
  struct Buffers {
    void* send;
    void* recv;
  };

  // Buffers are kept for the largest size seen, so allocation stays out of the timings.
  Buffers buffers(size_t bytes) {
    if (bytes > capacity_) {
      release();
      capacity_ = bytes;
      if (target_.device_buffers()) {
        send_ = device_alloc(bytes);
        recv_ = device_alloc(bytes);
      } else {
        host_send_.assign(bytes, 0);
        host_recv_.assign(bytes, 0);
        send_ = host_send_.data();
        recv_ = host_recv_.data();
      }
    }
    return {send_, recv_};
  }
  void release() {
    if (target_.device_buffers()) {
      device_free(send_);
      device_free(recv_);
    }
  }

  void fill(void* dst, size_t count) {
    std::vector<float> values(count);
    for (size_t i = 0; i < count; ++i) values[i] = pattern(rank_, i);
    std::vector<unsigned char> encoded(count * runtime::dtype_size(o_.dtype));
    comm::narrow_from_f32(values.data(), 1.0f, encoded.data(), o_.dtype, count);
    if (target_.device_buffers()) {
      copy_to_device(dst, encoded.data(), encoded.size());
    } else if (!encoded.empty()) {
      std::copy(encoded.begin(), encoded.end(), static_cast<unsigned char*>(dst));
    }
  }

  long long count_wrong(const void* result, size_t count) {
    std::vector<unsigned char> host(count * runtime::dtype_size(o_.dtype));
    if (target_.device_buffers()) {
      copy_to_host(host.data(), result, host.size());
    } else if (!host.empty()) {
      std::copy_n(static_cast<const unsigned char*>(result), host.size(), host.data());
    }
    std::vector<float> got(count);
    comm::widen_to_f32(host.data(), o_.dtype, got.data(), count);
    long long wrong = 0;
    const float inv = 1.0f / static_cast<float>(size_);
    for (size_t i = 0; i < count; ++i) {
      float sum = 0;
      for (int r = 0; r < size_; ++r) sum += pattern(r, i);
      if (o_.op == ReduceOp::kSum) {
        if (got[i] != sum) ++wrong;  // exact: small integers
        continue;
      }
      // Average: the exact quotient, allowing the 1-ulp freedom of where the division happens.
      float want = 0;
      comm::narrow_from_f32(&sum, inv, &want, DType::kF32, 1);
      const double ulp = o_.dtype == DType::kF32 ? 1.2e-7 : (o_.dtype == DType::kBF16 ? 7.9e-3 : 9.8e-4);
      if (std::fabs(got[i] - want) > ulp * std::max(1.0, std::fabs(static_cast<double>(want))) * 1.01) ++wrong;
    }
    return wrong;
  }

  const Options& o_;
  AllReduceTarget& target_;
  const runtime::RankContext& ctx_;
  int rank_ = 0;
  int size_ = 1;
  size_t capacity_ = 0;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  std::vector<unsigned char> host_send_, host_recv_;
};

void write_json(const std::string& path, const Options& o, const std::string& backend, const runtime::Topology& t,
                const std::string& command, const std::vector<Row>& rows) {
  std::vector<std::string> results;
  for (const Row& r : rows) {
    results.push_back(runtime::JsonObject()
                          .integer("bytes", static_cast<int64_t>(r.bytes))
                          .integer("count", static_cast<int64_t>(r.count))
                          .boolean("inplace", r.in_place)
                          .number("time_us", r.time_us, "%.3f")
                          .number("algbw_gbps", r.algbw, "%.4f")
                          .number("busbw_gbps", r.busbw, "%.4f")
                          .integer("wrong", r.wrong)
                          .str());
  }
  const std::string json = runtime::JsonObject()
                               .text("backend", backend)
                               .integer("world_size", t.world_size)
                               .integer("nodes", t.node_count)
                               .text("dtype", runtime::dtype_name(o.dtype))
                               .text("op", o.op == ReduceOp::kSum ? "sum" : "avg")
                               .text("sixteen_bit_sum", comm::sixteen_bit_sum_name(o.sum16))
                               .text("host", runtime::process_identity().host)
                               .text("date", utc_date())
                               .text("command", command)
                               .raw("results", runtime::json_array(results, "    "))
                               .str("  ");
  runtime::write_file_atomically(path, json + "\n", "--metrics-file");
}

int bench_main(int argc, char** argv) {
  const std::string command = command_line(argc, argv);
  Options o;
  runtime::BootstrapOptions options;
  const auto read = [&] {
    bool help = false;
    o = parse(argc, argv, &help);
    return !help;
  };
  if (!runtime::read_before_mpi(read, &options)) return 0;
  options.allow_gpu_sharing = o.allow_gpu_sharing;
  const runtime::RankBootstrap rank(&argc, &argv, options);
  if (rank.exit_agreed()) return 0;
  const runtime::RankContext& ctx = rank.ctx();
  const runtime::GpuBinding& binding = rank.gpu();
  const bool gpus = !binding.cpu_mode && !binding.device.simulated;
  std::unique_ptr<AllReduceTarget> target = make_target(o.backend, ctx, gpus, o.check_calls, o.sum16);
  const runtime::Topology& t = ctx.topology();
  const bool root = t.world_rank == 0;

  if (root) {
    std::printf("# dtrain-bench-allreduce: %s, %d ranks on %d node(s), %s buffers, dtype %s, op %s, 16-bit sums %s\n",
                target->name().c_str(), t.world_size, t.node_count, target->device_buffers() ? "device" : "host",
                runtime::dtype_name(o.dtype), o.op == ReduceOp::kSum ? "sum" : "avg",
                comm::sixteen_bit_sum_name(o.sum16));
    std::printf("# %s\n#\n", command.c_str());
    std::printf("#                                         out-of-place                     in-place\n");
    std::printf("# %10s %12s %6s %5s  %9s %7s %7s %6s  %9s %7s %7s %6s\n", "size", "count", "type", "redop", "time",
                "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    std::printf("# %10s %12s %6s %5s  %9s %7s %7s %6s  %9s %7s %7s %6s\n", "(B)", "(elements)", "", "", "(us)",
                "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  }
  Bench bench(o, *target, ctx);
  std::vector<Row> rows;
  const size_t esize = runtime::dtype_size(o.dtype);
  double busbw_sum = 0;
  int busbw_rows = 0;
  long long wrong_total = 0;
  for (double bytes = static_cast<double>(o.min_bytes); bytes <= static_cast<double>(o.max_bytes) * 1.0000001;
       bytes *= o.factor) {
    const size_t count = static_cast<size_t>(bytes) / esize;
    const Row out = bench.measure(count, false);
    const Row in = bench.measure(count, true);
    rows.push_back(out);
    rows.push_back(in);
    busbw_sum += out.busbw + in.busbw;
    busbw_rows += 2;
    wrong_total += out.wrong + in.wrong;
    if (root) {
      std::printf("  %10zu %12zu %6s %5s  %9.2f %7.2f %7.2f %6lld  %9.2f %7.2f %7.2f %6lld\n", count * esize, count,
                  runtime::dtype_name(o.dtype), o.op == ReduceOp::kSum ? "sum" : "avg", out.time_us, out.algbw,
                  out.busbw, out.wrong, in.time_us, in.algbw, in.busbw, in.wrong);
      std::fflush(stdout);
    }
  }
  if (root) {
    std::printf("# Avg bus bandwidth    : %.3f GB/s\n", busbw_rows ? busbw_sum / busbw_rows : 0.0);
    if (wrong_total == 0) {
      std::printf("# all correct\n");
    } else {
      std::printf("# %lld wrong\n", wrong_total);
    }
    if (!o.json.empty()) write_json(o.json, o, target->name(), t, command, rows);
  }
  return wrong_total == 0 ? 0 : runtime::kExitFailure;
}

}  // namespace
}  // namespace dtrain::bench

int main(int argc, char** argv) {
  return dtrain::runtime::run_main(argc, argv, dtrain::bench::bench_main);
}
