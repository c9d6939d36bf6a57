// dtrain-bench-data: the loader alone, on a folder of JPEGs, from the file to the pinned uint8 batch
// (read, decode at the smallest DCT scale that covers the crop, random-resized-crop, resize, flip,
// write NHWC), as dtrain-train's training split uses it. One row per thread count:
//   dtrain-bench-data --data-dir DIR --loader-threads 1,2,4,14 --batch-per-rank 256 --batches 20 --metrics-file FILE
// reads DIR/train when it exists, else DIR. Each row builds a fresh loader, takes --warmup-batches
// batches untimed (thread start, first reads), then times --batches batches; when an epoch runs dry
// the next starts inside the timing, as in training. A plain process: no MPI, no GPU.
// --rounds R (default 3) measures every thread count R times, the counts interleaved (1, 2, ..., 14,
// 1, 2, ...), and reports the median of each: on a shared VM the rate of one thread moves by a
// quarter from one minute to the next (bench/results/2026-11-23_h200x2/wire_ab/probe), and a single
// pass in count order charges that drift to the scaling.
//
// The machine's own ceiling, measured beside each row (--clock-probe-seconds, default 0.5): the same
// number of threads each run a fixed integer loop that touches no memory (four independent
// multiply-xorshift chains); its rate per thread at N threads against 1 thread is how far the cores'
// clock (all-core turbo, a host's SMT siblings, other tenants) lets any compute-bound work scale.
// A loader that keeps up with that column loses nothing of its own; the gap between the two
// columns is what the loader itself costs (shared memory bandwidth, locks, cache misses).
//
// What it checks: no batch is all zeros, every label is a class of the folder, and the last batch
// (the same batch number in every row) has the same checksum at every thread count, since a
// sample's augmentation depends only on (seed, epoch, index). Any failure exits non-zero.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/result_file.h"
#include "runtime/base/cli.h"
#include "runtime/base/env.h"
#include "runtime/base/error.h"
#include "runtime/base/process_identity.h"
#include "runtime/io/atomic_file.h"
#include "runtime/io/json.h"
#include "runtime/mpi/main_guard.h"
#include "train/data/data_loader.h"
#include "train/data/image_folder_dataset.h"
#include "train/data/sharded_sampler.h"

namespace dtrain::bench {
namespace {

namespace po = runtime::po;

struct Options {
  std::string data_dir;
  std::string threads = "1,2,4,14";
  int batch = 256;
  int batches = 20;
  int warmup_batches = 2;
  int rounds = 3;
  int prefetch = 4;
  int crop = 224;
  uint64_t seed = 1;
  double clock_probe_seconds = 0.5;
  std::string json;
};

// Declares a flag (core/cli.h accepts --data_dir for --data-dir) and reads it back.
class Flags {
 public:
  explicit Flags(po::options_description* d) : d_(d) {}
  template <typename T>
  void add(const std::string& dashed, const std::string& help) {
    d_->add_options()(dashed.c_str(), po::value<T>(), help.c_str());
  }
  // Stores the flag's value in *out when it was given.
  template <typename T>
  static void take(const po::variables_map& values, const std::string& dashed, T* out) {
    if (values.count(dashed) > 0) *out = values[dashed].as<T>();
  }

 private:
  po::options_description* d_;
};

Options parse(int argc, char** argv, bool* help) {
  Options o;
  po::options_description d("dtrain-bench-data options");
  Flags flags(&d);
  flags.add<std::string>("data-dir", "ImageNet-layout folder of JPEGs; its train/ split when there is one (required)");
  flags.add<std::string>("loader-threads",
                         "comma-separated loader thread counts, one row each (default " + o.threads + ")");
  flags.add<int>("batch-per-rank", "images per batch (default " + std::to_string(o.batch) + ")");
  flags.add<int>("batches", "timed batches per row (default " + std::to_string(o.batches) + ")");
  flags.add<int>("warmup-batches",
                 "batches taken before timing, per row (default " + std::to_string(o.warmup_batches) + ")");
  flags.add<int>("prefetch-batches", "batches in flight (default " + std::to_string(o.prefetch) + ")");
  flags.add<int>("rounds", "passes over the thread counts, interleaved; each row is the median (default " +
                               std::to_string(o.rounds) + ")");
  flags.add<int>("crop", "side of the random-resized crop (default " + std::to_string(o.crop) + ")");
  flags.add<uint64_t>("seed", "sampler and augmentation seed (default " + std::to_string(o.seed) + ")");
  flags.add<double>("clock-probe-seconds",
                    "length of the CPU clock probe run beside each row, 0 for none (default 0.5)");
  flags.add<std::string>("metrics-file", "also write the results to this JSON file");
  const runtime::ParsedCommandLine parsed = runtime::parse_command_line(argc, argv, d);
  if (parsed.help) {
    std::printf("%s", runtime::usage("dtrain-bench-data", d).c_str());
    *help = true;
    return o;
  }
  const po::variables_map& v = parsed.values;
  Flags::take(v, "data-dir", &o.data_dir);
  Flags::take(v, "loader-threads", &o.threads);
  Flags::take(v, "batch-per-rank", &o.batch);
  Flags::take(v, "batches", &o.batches);
  Flags::take(v, "warmup-batches", &o.warmup_batches);
  Flags::take(v, "prefetch-batches", &o.prefetch);
  Flags::take(v, "rounds", &o.rounds);
  Flags::take(v, "crop", &o.crop);
  Flags::take(v, "seed", &o.seed);
  Flags::take(v, "clock-probe-seconds", &o.clock_probe_seconds);
  Flags::take(v, "metrics-file", &o.json);
  DTRAIN_USAGE_CHECK(!o.data_dir.empty())
      << "--data-dir is required: a folder of JPEGs (run with --help for the flags)";
  DTRAIN_USAGE_CHECK(o.batch > 0) << "--batch-per-rank " << o.batch << ": must be positive";
  DTRAIN_USAGE_CHECK(o.batches > 0) << "--batches " << o.batches << ": must be positive";
  DTRAIN_USAGE_CHECK(o.rounds > 0 && o.rounds <= 100) << "--rounds " << o.rounds << ": must be in 1..100";
  DTRAIN_USAGE_CHECK(o.warmup_batches >= 0) << "--warmup-batches " << o.warmup_batches << ": must not be negative";
  DTRAIN_USAGE_CHECK(o.prefetch > 0) << "--prefetch-batches " << o.prefetch << ": must be positive";
  DTRAIN_USAGE_CHECK(o.crop >= 8 && o.crop <= 4096) << "--crop " << o.crop << ": expected 8-4096";
  DTRAIN_USAGE_CHECK(o.clock_probe_seconds >= 0 && o.clock_probe_seconds <= 60)
      << "--clock-probe-seconds " << o.clock_probe_seconds << ": expected 0-60";
  return o;
}

std::vector<int> thread_counts(const std::string& text) {
  std::vector<int> counts;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    counts.push_back(
        static_cast<int>(runtime::parse_int_in_range(item, 1, 1024, "--loader-threads " + text + ": count")));
  }
  DTRAIN_USAGE_CHECK(!counts.empty() && text.back() != ',')
      << "--loader-threads '" << text << "': expected a list like 1,2,4,14";
  return counts;
}

struct Machine {
  std::string host, cpu_model;
  unsigned online_cores = 0;  // std::thread::hardware_concurrency()
  int usable_cores = 0;       // in this process's affinity mask
};

Machine this_machine() {
  Machine m;
  m.host = runtime::process_identity().host;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      m.cpu_model = line.substr(line.find(':') + 2);
      break;
    }
  }
  if (m.cpu_model.empty()) m.cpu_model = "unknown";
  m.online_cores = std::thread::hardware_concurrency();
  cpu_set_t set;
  m.usable_cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : static_cast<int>(m.online_cores);
  return m;
}

struct Row {
  int threads = 0;
  double seconds = 0;
  double img_per_sec = 0;
  double img_per_sec_per_thread = 0;
  double linear_percent = 0;        // per-thread rate against the first row's
  double clock_per_thread = 0;      // the clock probe's loops/s per thread (median of the rounds)
  double clock_linear_percent = 0;  // the same against the first row's
  std::vector<double> round_clock;  // the clock probe's loops/s per thread, each round
  int epochs_started = 0;           // inside the timed batches
  uint64_t checksum = 0;            // of the last batch: pixels and labels
  std::vector<double> round_rates;  // img/s of each round; img_per_sec is their median
};

// FNV-1a over the batch's pixels and labels.
uint64_t checksum(const train::Batch& batch, size_t image_bytes) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const uint8_t*>(batch.pixels.data());
  for (size_t i = 0; i < image_bytes * static_cast<size_t>(batch.size); ++i) h = (h ^ p[i]) * 1099511628211ull;
  for (int i = 0; i < batch.size; ++i) h = (h ^ static_cast<uint32_t>(batch.labels[i])) * 1099511628211ull;
  return h;
}

// Cheap enough for every batch: a sample of bytes first, the whole batch only when the sample is 0.
void check_batch(const train::Batch& batch, size_t image_bytes, int expected_size, int classes, long number) {
  DTRAIN_CHECK(batch.size == expected_size)
      << "batch " << number << " holds " << batch.size << " images, not " << expected_size;
  for (int i = 0; i < batch.size; ++i) {
    DTRAIN_CHECK(batch.labels[i] >= 0 && batch.labels[i] < classes)
        << "batch " << number << " image " << i << " has label " << batch.labels[i] << " outside 0.." << classes - 1;
  }
  const auto* p = static_cast<const uint8_t*>(batch.pixels.data());
  const size_t bytes = image_bytes * static_cast<size_t>(batch.size);
  for (size_t i = 0; i < bytes; i += 97) {
    if (p[i] != 0) return;
  }
  DTRAIN_CHECK(std::any_of(p, p + bytes, [](uint8_t v) { return v != 0; }))
      << "batch " << number << " is all zeros: the loader wrote nothing into it";
}

Row measure(const Options& o, const train::ImageFolderDataset& dataset, const train::ShardedSampler& sampler,
            int threads) {
  train::LoaderOptions lo;
  lo.batch_size = o.batch;
  lo.threads = threads;
  lo.prefetch = o.prefetch;
  lo.seed = o.seed;
  lo.keep_partial_batch = false;
  train::DataLoader loader(dataset, sampler, lo);
  const size_t image_bytes = dataset.output_shape().bytes();
  int epoch = 0;
  long number = 0;
  Row row;
  row.threads = threads;
  loader.start_epoch(epoch);
  auto take = [&]() -> const train::Batch* {
    const train::Batch* batch = loader.next();
    if (batch == nullptr) {
      loader.start_epoch(++epoch);
      ++row.epochs_started;
      batch = loader.next();
      DTRAIN_CHECK(batch != nullptr) << "epoch " << epoch << " has no batch";
    }
    check_batch(*batch, image_bytes, o.batch, dataset.num_classes(), number++);
    return batch;
  };
  for (int i = 0; i < o.warmup_batches; ++i) take();
  row.epochs_started = 0;
  const auto start = std::chrono::steady_clock::now();
  const train::Batch* last = nullptr;
  for (int i = 0; i < o.batches; ++i) last = take();
  row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  row.checksum = checksum(*last, image_bytes);
  row.img_per_sec = static_cast<double>(o.batch) * o.batches / row.seconds;
  row.img_per_sec_per_thread = row.img_per_sec / threads;
  return row;
}

// The clock probe: `threads` threads run four independent multiply-xorshift chains (no memory, no
// shared state) for `seconds`; returns the loop iterations per second of one thread (the mean).
double clock_probe(int threads, double seconds) {
  std::vector<double> rates(static_cast<size_t>(threads), 0.0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&rates, t, seconds] {
      uint64_t a = 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(t), b = a ^ 0xD1B54A32D192ED03ull, c = a * 3,
               d = a * 7;
      const auto start = std::chrono::steady_clock::now();
      const auto until = start + std::chrono::duration<double>(seconds);
      uint64_t loops = 0;
      for (auto now = start; now < until; now = std::chrono::steady_clock::now()) {
        for (int i = 0; i < 4096; ++i) {
          a = (a ^ (a >> 29)) * 0xBF58476D1CE4E5B9ull;
          b = (b ^ (b >> 31)) * 0x94D049BB133111EBull;
          c = (c ^ (c >> 27)) * 0xBF58476D1CE4E5B9ull;
          d = (d ^ (d >> 30)) * 0x94D049BB133111EBull;
        }
        loops += 4096;
      }
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      // The chains' end values go into the result, so the loop cannot be dropped.
      rates[static_cast<size_t>(t)] = static_cast<double>(loops + ((a ^ b ^ c ^ d) & 1)) / elapsed;
    });
  }
  for (std::thread& th : pool) th.join();
  double sum = 0;
  for (double r : rates) sum += r;
  return sum / threads;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t k = values.size();
  if (k == 0) return 0;
  return k % 2 ? values[k / 2] : 0.5 * (values[k / 2 - 1] + values[k / 2]);
}

std::string hex(uint64_t v) {
  char text[24];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(v));
  return text;
}

void write_json(const Options& o, const std::string& command, const std::string& date, const Machine& m,
                const std::string& split_dir, size_t images, int classes, const std::vector<Row>& rows,
                bool checksums_agree) {
  std::vector<std::string> row_objects;
  for (const Row& r : rows) {
    std::vector<std::string> rounds;
    for (double rate : r.round_rates) rounds.push_back(runtime::json_number(rate, "%.1f"));
    row_objects.push_back(runtime::JsonObject()
                              .integer("threads", r.threads)
                              .number("img_per_sec", r.img_per_sec, "%.1f")
                              .number("img_per_sec_per_thread", r.img_per_sec_per_thread, "%.1f")
                              .number("linear_percent", r.linear_percent, "%.1f")
                              .number("clock_loops_per_sec_per_thread", r.clock_per_thread, "%.4g")
                              .number("clock_linear_percent", r.clock_linear_percent, "%.1f")
                              .number("seconds", r.seconds, "%.3f")
                              .integer("epochs_started", r.epochs_started)
                              .text("last_batch_checksum", hex(r.checksum))
                              .raw("round_img_per_sec", runtime::json_array(rounds))
                              .str());
  }
  const std::string machine = runtime::JsonObject()
                                  .text("host", m.host)
                                  .text("cpu_model", m.cpu_model)
                                  .integer("online_cores", m.online_cores)
                                  .integer("usable_cores", m.usable_cores)
                                  .str();
  const std::string json = runtime::JsonObject()
                               .text("loader", "dtrain DataLoader")
                               .raw("rows", runtime::json_array(row_objects, "    "))
                               .raw("machine", machine)
                               .text("command", command)
                               .text("date", date)
                               .text("data_dir", split_dir)
                               .integer("images", static_cast<int64_t>(images))
                               .integer("classes", classes)
                               .integer("batch", o.batch)
                               .integer("warmup_batches", o.warmup_batches)
                               .integer("measured_batches", o.batches)
                               .integer("rounds", o.rounds)
                               .integer("prefetch", o.prefetch)
                               .integer("crop", o.crop)
                               .integer("seed", static_cast<int64_t>(o.seed))
                               .number("clock_probe_seconds", o.clock_probe_seconds, "%.2f")
                               .boolean("checksums_agree", checksums_agree)
                               .str("  ");
  runtime::write_file_atomically(o.json, json + "\n", "--metrics-file");
}

int bench_main(int argc, char** argv) {
  const std::string command = command_line(argc, argv);
  bool help = false;
  const Options o = parse(argc, argv, &help);
  if (help) return 0;
  const std::vector<int> counts = thread_counts(o.threads);
  namespace fs = std::filesystem;
  DTRAIN_USAGE_CHECK(fs::is_directory(o.data_dir)) << "--data-dir " << o.data_dir << ": not a directory";
  const std::string split_dir =
      fs::is_directory(fs::path(o.data_dir) / "train") ? (fs::path(o.data_dir) / "train").string() : o.data_dir;
  train::ImageFolderOptions fo;
  fo.train = true;
  fo.crop = o.crop;
  fo.resize = 256;
  fo.max_bad_fraction = 0.001;
  const train::ImageFolderDataset dataset(split_dir, fo);
  train::SamplerOptions so;
  so.seed = o.seed;
  so.shuffle = true;
  so.drop_last = true;
  so.pad = true;
  const train::ShardedSampler sampler(dataset.size(), 1, 0, so);
  DTRAIN_USAGE_CHECK(sampler.per_rank() >= static_cast<size_t>(o.batch))
      << "--batch-per-rank " << o.batch << ": " << split_dir << " has only " << dataset.size() << " images";

  const Machine m = this_machine();
  const std::string date = utc_date();
  std::printf(
      "# dtrain-bench-data: JPEG -> decode, random-resized crop %d, flip -> pinned uint8 NHWC batches\n"
      "# %s\n# %s, host %s, %s, %u cores online, %d usable\n"
      "# data: %s, %zu images in %d classes\n"
      "# batch %d, prefetch %d, %d warm-up + %d timed batches per row, seed %llu\n#\n",
      o.crop, command.c_str(), date.c_str(), m.host.c_str(), m.cpu_model.c_str(), m.online_cores, m.usable_cores,
      split_dir.c_str(), dataset.size(), dataset.num_classes(), o.batch, o.prefetch, o.warmup_batches, o.batches,
      static_cast<unsigned long long>(o.seed));
  std::printf("# %7s %12s %14s %12s %14s %9s %7s %18s\n", "threads", "img/s", "img/s/thread", "% of linear",
              "clock % linear", "seconds", "epochs", "last batch fnv1a");
  std::fflush(stdout);
  std::vector<Row> rows(counts.size());
  for (int round = 0; round < o.rounds; ++round) {
    for (size_t i = 0; i < counts.size(); ++i) {
      Row r = measure(o, dataset, sampler, counts[i]);
      std::fprintf(stderr, "round %d: %d thread(s) %.1f img/s\n", round + 1, r.threads, r.img_per_sec);
      r.round_rates = rows[i].round_rates;
      r.round_rates.push_back(r.img_per_sec);
      r.round_clock = rows[i].round_clock;
      if (o.clock_probe_seconds > 0) r.round_clock.push_back(clock_probe(counts[i], o.clock_probe_seconds));
      DTRAIN_CHECK(round == 0 || r.checksum == rows[i].checksum) << "the last batch differs between rounds";
      rows[i] = r;
    }
  }
  for (Row& r : rows) {
    r.img_per_sec = median(r.round_rates);
    r.img_per_sec_per_thread = r.img_per_sec / r.threads;
    r.linear_percent = 100.0 * r.img_per_sec_per_thread / rows.front().img_per_sec_per_thread;
    r.clock_per_thread = median(r.round_clock);
    if (o.clock_probe_seconds > 0) r.clock_linear_percent = 100.0 * r.clock_per_thread / rows.front().clock_per_thread;
    std::printf("  %7d %12.1f %14.1f %11.1f%% %13.1f%% %9.3f %7d %18s\n", r.threads, r.img_per_sec,
                r.img_per_sec_per_thread, r.linear_percent, r.clock_linear_percent, r.seconds, r.epochs_started,
                hex(r.checksum).c_str());
  }
  std::fflush(stdout);
  const bool agree =
      std::all_of(rows.begin(), rows.end(), [&](const Row& r) { return r.checksum == rows[0].checksum; });
  const train::BadFiles bad = dataset.bad_files();
  std::printf(
      "#\n# img/s: the median of %d rounds (the counts interleaved); seconds and epochs: the last round. %% of "
      "linear: img/s per thread against the first row's; clock %% linear: the same for a loop that touches no memory, "
      "run with as many threads right after each row (the machine's own ceiling). The last batch is batch %d of every "
      "row: "
      "its checksums %s.\n# bad files: %zu found by the scan, %zu unreadable\n",
      o.rounds, o.warmup_batches + o.batches - 1, agree ? "agree" : "DIFFER", bad.found_by_scan, bad.unreadable.size());
  if (!o.json.empty()) write_json(o, command, date, m, split_dir, dataset.size(), dataset.num_classes(), rows, agree);
  DTRAIN_CHECK(agree) << "the last batch differs between thread counts: the loader's output depends on its threads";
  return 0;
}

}  // namespace
}  // namespace dtrain::bench

int main(int argc, char** argv) {
  return dtrain::runtime::run_main(argc, argv, dtrain::bench::bench_main);
}
