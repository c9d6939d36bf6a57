// dtrain-bench-library: what the C ABI of libdtrain.so costs, measured as a user program calls it
// (<dtrain/dtrain.h> and MPI only):
//
//   mpirun -np 2 build/bin/dtrain-bench-library --json library_np2.json
//
//   latency    --latency-calls named 4-byte fp32 all-reduces (a name each), each submitted and
//              waited in turn; us per call as the median and p90 over --latency-reps repetitions
//              (a repetition's time / calls, the slowest rank), and every single call on rank 0
//   bandwidth  fp32 sums of --sizes bytes through the ABI and MPI_Allreduce on the same buffers, in
//              the same process, alternating; out of place and in place; mean of --iters calls after -w
//              warm-up calls, the slowest rank (as dtrain-bench-allreduce, which measures dtrain's
//              own communicator: bench/run_library.sh runs both)
//   fusion     --fusion-ops named 4-byte all-reduces submitted at once, then all waited: the time
//              and the collectives they ran in (dtrain_fusion_stats), over --fusion-reps
//              repetitions
// Every result is checked against its exact sum; a wrong one ends the run.
#include <dtrain/dtrain.h>
#include <mpi.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sstream>
#include <stdexcept>

#include "bench/library/library_bench.h"

namespace dtrain::bench {
namespace {

constexpr const char* kUsage =
    "usage: mpirun -np N dtrain-bench-library [--modes latency,bandwidth,fusion] [--latency-calls 1000]\n"
    "         [--latency-reps 10] [--sizes 1M,4M,16M,64M] [-w 5] [--iters 20] [--fusion-ops 1000]\n"
    "         [--fusion-reps 10] [--json FILE]\n";

int positive(const std::string& flag, const std::string& text) {
  size_t end = 0;
  long value = 0;
  try {
    value = std::stol(text, &end);
  } catch (...) {
    end = 0;
  }
  if (end != text.size() || value <= 0 || value > 1000000000)
    throw std::invalid_argument(flag + " '" + text + "': expected a positive integer");
  return static_cast<int>(value);
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) parts.push_back(part);
  return parts;
}

// "64M", "4K", "1G", "4096": a multiple of 4 bytes (fp32), at most 1 GiB.
int64_t size_bytes(const std::string& text) {
  const std::string bad = "--sizes '" + text + "': expected a size such as 4096, 4K, 64M, 1G (a multiple of 4 bytes)";
  if (text.empty()) throw std::invalid_argument(bad);
  int64_t unit = 1;
  std::string digits = text;
  const char last = text.back();
  if (last == 'K' || last == 'M' || last == 'G') {
    unit = last == 'K' ? 1 << 10 : (last == 'M' ? 1 << 20 : 1 << 30);
    digits.pop_back();
  }
  if (digits.empty()) throw std::invalid_argument(bad);
  const int64_t bytes = positive("--sizes", digits) * unit;
  if (bytes % 4 != 0 || bytes > (int64_t{1} << 30)) throw std::invalid_argument(bad);
  return bytes;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") throw std::invalid_argument("");
    if (i + 1 >= argc) throw std::invalid_argument(flag + ": expected a value after it");
    const std::string value = argv[++i];
    if (flag == "--latency-calls") {
      o.latency_calls = positive(flag, value);
    } else if (flag == "--latency-reps") {
      o.latency_reps = positive(flag, value);
    } else if (flag == "-w") {
      o.warmup = value == "0" ? 0 : positive(flag, value);
    } else if (flag == "--iters") {
      o.iters = positive(flag, value);
    } else if (flag == "--fusion-ops") {
      o.fusion_ops = positive(flag, value);
    } else if (flag == "--fusion-reps") {
      o.fusion_reps = positive(flag, value);
    } else if (flag == "--json") {
      o.json = value;
    } else if (flag == "--sizes") {
      o.sizes.clear();
      for (const std::string& s : split(value)) o.sizes.push_back(size_bytes(s));
    } else if (flag == "--modes") {
      o.modes = split(value);
      for (const std::string& m : o.modes)
        if (m != "latency" && m != "bandwidth" && m != "fusion")
          throw std::invalid_argument("--modes '" + m + "': expected latency, bandwidth or fusion");
    } else {
      throw std::invalid_argument("unknown flag '" + flag + "'");
    }
  }
  return o;
}

bool wants(const Options& o, const char* mode) {
  for (const std::string& m : o.modes)
    if (m == mode) return true;
  return false;
}

std::string summary_json(const Summary& s) {
  char text[200];
  std::snprintf(text, sizeof(text), "{\"median\": %.3f, \"p90\": %.3f, \"min\": %.3f, \"max\": %.3f}", s.median, s.p90,
                s.min, s.max);
  return text;
}

std::string row_json(const BandwidthRow& r) {
  char text[300];
  std::snprintf(text, sizeof(text),
                "{\"target\": \"%s\", \"bytes\": %lld, \"inplace\": %s, \"time_us\": %.3f, \"algbw_gbps\": %.4f, "
                "\"busbw_gbps\": %.4f, \"wrong\": %lld}",
                r.target.c_str(), static_cast<long long>(r.bytes), r.in_place ? "true" : "false", r.time_us, r.algbw,
                r.busbw, static_cast<long long>(r.wrong));
  return text;
}

// Text without quotes, backslashes or control characters (a command line, a host name) as a JSON string.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
  }
  return out + "\"";
}

struct Results {
  bool latency = false;
  LatencyResult lat;
  std::vector<BandwidthRow> rows;
  bool fusion = false;
  FusionResult fus;
};

void write_json(const Options& o, const std::string& command, const Results& r) {
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%d", std::gmtime(&now));
  std::ostringstream j;
  j << "{\n  \"benchmark\": \"dtrain-bench-library\",\n  \"dtrain_version\": " << quoted(dtrain_version())
    << ",\n  \"world_size\": " << dtrain_size() << ",\n  \"nodes\": " << dtrain_cross_size()
    << ",\n  \"host\": " << quoted(host) << ",\n  \"date\": " << quoted(date)
    << ",\n  \"command\": " << quoted(command);
  if (r.latency) {
    j << ",\n  \"latency\": {\"calls\": " << o.latency_calls << ", \"repetitions\": " << o.latency_reps
      << ", \"bytes\": 4, \"per_call_us\": " << summary_json(r.lat.per_call_us)
      << ", \"single_call_us_rank0\": " << summary_json(r.lat.single_call_us)
      << ", \"operations\": " << r.lat.operations << ", \"collectives\": " << r.lat.collectives << "}";
  }
  if (!r.rows.empty()) {
    j << ",\n  \"bandwidth\": {\"dtype\": \"fp32\", \"op\": \"sum\", \"warmup\": " << o.warmup
      << ", \"iters\": " << o.iters << ", \"results\": [";
    for (size_t i = 0; i < r.rows.size(); ++i) j << (i ? ",\n    " : "\n    ") << row_json(r.rows[i]);
    j << "\n  ]}";
  }
  if (r.fusion) {
    j << ",\n  \"fusion\": {\"operations_submitted\": " << o.fusion_ops
      << ", \"bytes_each\": 4, \"repetitions\": " << o.fusion_reps << ", \"time_us\": " << summary_json(r.fus.time_us)
      << ", \"collectives\": " << summary_json(r.fus.collectives) << ", \"operations\": " << r.fus.operations << "}";
  }
  j << "\n}\n";
  const std::string tmp = o.json + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  require(f != nullptr, "--json " + o.json + ": cannot write " + tmp + ": " + std::strerror(errno));
  const std::string text = j.str();
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  require(std::fclose(f) == 0 && written && std::rename(tmp.c_str(), o.json.c_str()) == 0,
          "--json " + o.json + ": cannot write it: " + std::strerror(errno));
}

void print_latency(const Options& o, const LatencyResult& l) {
  std::printf("# latency: %d named 4-byte fp32 all-reduces, each submitted and waited, %d repetitions\n",
              o.latency_calls, o.latency_reps);
  std::printf("  per call (us, the slowest rank): median %.2f  p90 %.2f  min %.2f  max %.2f\n", l.per_call_us.median,
              l.per_call_us.p90, l.per_call_us.min, l.per_call_us.max);
  std::printf("  single calls on rank 0 (us): median %.2f  p90 %.2f  max %.2f;  %lld operations in %lld collectives\n",
              l.single_call_us.median, l.single_call_us.p90, l.single_call_us.max, static_cast<long long>(l.operations),
              static_cast<long long>(l.collectives));
}

void print_bandwidth_header(const Options& o) {
  std::printf("# bandwidth: fp32 sum, mean of %d calls after %d warm-up, the slowest rank\n", o.iters, o.warmup);
  std::printf("# %-14s %11s %8s %11s %8s %8s %7s\n", "target", "size (B)", "inplace", "time (us)", "algbw", "busbw",
              "#wrong");
}

void print_row(const BandwidthRow& r) {
  std::printf("  %-14s %11lld %8s %11.1f %8.3f %8.3f %7lld\n", r.target.c_str(), static_cast<long long>(r.bytes),
              r.in_place ? "yes" : "no", r.time_us, r.algbw, r.busbw, static_cast<long long>(r.wrong));
  std::fflush(stdout);
}

void print_fusion(const Options& o, const FusionResult& f) {
  std::printf("# fusion: %d named 4-byte all-reduces submitted at once, then all waited, %d repetitions\n",
              o.fusion_ops, o.fusion_reps);
  std::printf(
      "  time (us, the slowest rank): median %.1f  p90 %.1f;  ran in %.0f collectives (median; %.0f-%.0f)"
      " for %lld operations\n",
      f.time_us.median, f.time_us.p90, f.collectives.median, f.collectives.min, f.collectives.max,
      static_cast<long long>(f.operations));
}

Results run(const Options& o, bool root) {
  Results r;
  if (root)
    std::printf("# dtrain-bench-library: %d ranks on %d node(s), dtrain %s (ABI %d)\n", dtrain_size(),
                dtrain_cross_size(), dtrain_version(), dtrain_abi_version());
  if (wants(o, "latency")) {
    r.latency = true;
    r.lat = measure_latency(o);
    if (root) print_latency(o, r.lat);
  }
  if (wants(o, "bandwidth")) {
    if (root) print_bandwidth_header(o);
    for (int64_t bytes : o.sizes) {
      for (const BandwidthRow& row : measure_bandwidth(bytes, o)) {
        if (root) print_row(row);
        r.rows.push_back(row);
      }
    }
  }
  if (wants(o, "fusion")) {
    r.fusion = true;
    r.fus = measure_fusion(o);
    if (root) print_fusion(o, r.fus);
  }
  return r;
}

int bench_main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::invalid_argument& e) {
    if (rank == 0) std::fprintf(stderr, "%s%s%s", e.what(), e.what()[0] ? "\n" : "", kUsage);
    MPI_Finalize();
    return e.what()[0] ? 2 : 0;
  }
  check_status(dtrain_check_abi(DTRAIN_ABI_VERSION), "dtrain_check_abi");
  check_status(dtrain_init(), "dtrain_init");
  const Results r = run(o, rank == 0);
  int64_t wrong = 0;
  for (const BandwidthRow& row : r.rows) wrong += row.wrong;
  if (rank == 0 && !o.json.empty()) {
    std::string command;
    for (int i = 0; i < argc; ++i) {
      if (i > 0) command += ' ';
      command += argv[i];
    }
    write_json(o, command, r);
  }
  if (rank == 0) std::printf(wrong == 0 ? "# all correct\n" : "# %lld wrong\n", static_cast<long long>(wrong));
  check_status(dtrain_shutdown(), "dtrain_shutdown");
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace dtrain::bench

int main(int argc, char** argv) {
  return dtrain::bench::bench_main(argc, argv);
}
