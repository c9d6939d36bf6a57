#include "tests/support/realistic_tree.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "runtime/base/error.h"
#include "tests/support/realistic_images.h"

namespace dtrain::test {
namespace {

namespace fs = std::filesystem;

struct Job {
  int split;  // 0 train, 1 val
  int label;
  int index;          // within the class
  size_t val_number;  // 1-based across the val split, for ImageNet-style val names
};

struct FileStats {
  int width = 0, height = 0, quality = 0;
  size_t bytes = 0;
  JpegColour colour = JpegColour::kRgb;
  bool subsampling_444 = false;
  int encodes = 0;
  bool quality_moved = false;
};

fs::path file_path(const fs::path& root, uint64_t seed, const Job& job) {
  const std::string wn = wnid(seed, job.label);
  char name[64];
  if (job.split == 0) {
    std::snprintf(name, sizeof(name), "%s_%d.JPEG", wn.c_str(), job.index);
    return root / "train" / wn / name;
  }
  std::snprintf(name, sizeof(name), "ILSVRC2012_val_%08zu.JPEG", job.val_number);
  return root / "val" / wn / name;
}

double percentile(std::vector<double> sorted_values, double p) {
  if (sorted_values.empty()) return 0;
  const size_t i = std::min(sorted_values.size() - 1, static_cast<size_t>(p * (sorted_values.size() - 1) + 0.5));
  return sorted_values[i];
}

RealisticTreeSummary summarize(const std::vector<FileStats>& stats, double seconds) {
  RealisticTreeSummary s;
  s.files = stats.size();
  s.seconds = seconds;
  if (stats.empty()) return s;
  std::vector<double> kib;
  double width = 0, height = 0, quality = 0, encodes = 0, kib_500x375 = 0;
  for (const FileStats& f : stats) {
    const double k = static_cast<double>(f.bytes) / 1024.0;
    kib.push_back(k);
    width += f.width;
    height += f.height;
    quality += f.quality;
    encodes += f.encodes;
    s.grey += f.colour == JpegColour::kGrey;
    s.cmyk += f.colour == JpegColour::kCmyk;
    s.subsampling_444 += f.subsampling_444;
    s.quality_moved += f.quality_moved;
    s.min_quality = s.min_quality == 0 ? f.quality : std::min(s.min_quality, f.quality);
    s.max_quality = std::max(s.max_quality, f.quality);
    s.outside_30_150_kib += k < 30 || k > 150;
    if (f.width == 500 && f.height == 375) {
      ++s.files_500x375;
      kib_500x375 += k;
    }
  }
  const double n = static_cast<double>(stats.size());
  std::sort(kib.begin(), kib.end());
  s.mean_width = width / n;
  s.mean_height = height / n;
  s.mean_quality = quality / n;
  s.encodes_per_file = encodes / n;
  double total = 0;
  for (double k : kib) total += k;
  s.mean_kib = total / n;
  s.total_mib = total / 1024.0;
  s.min_kib = kib.front();
  s.max_kib = kib.back();
  s.p5_kib = percentile(kib, 0.05);
  s.median_kib = percentile(kib, 0.5);
  s.p95_kib = percentile(kib, 0.95);
  s.mean_kib_500x375 = s.files_500x375 ? kib_500x375 / static_cast<double>(s.files_500x375) : 0;
  return s;
}

}  // namespace

std::string wnid(uint64_t seed, int label) {
  // Steps of 10,000 with a seed-dependent offset below 9,000: distinct and in label order.
  const uint64_t offset = (seed * 2654435761ull + static_cast<uint64_t>(label) * 40503ull) % 9000;
  char name[16];
  std::snprintf(name, sizeof(name), "n%08llu", static_cast<unsigned long long>(1000000 + label * 10000 + offset));
  return name;
}

RealisticTreeSummary write_realistic_tree(const std::string& root_text, const RealisticTreeOptions& o) {
  DTRAIN_CHECK(o.classes > 0 && o.classes <= 1000 && o.train_per_class >= 0 && o.val_per_class >= 0 && o.threads > 0)
      << "bad tree options";
  const fs::path root(root_text);
  std::vector<Job> jobs;
  size_t val_number = 0;
  for (int split = 0; split < 2; ++split) {
    const int per_class = split == 0 ? o.train_per_class : o.val_per_class;
    for (int label = 0; label < o.classes; ++label) {
      fs::create_directories(root / (split == 0 ? "train" : "val") / wnid(o.seed, label));
      for (int i = 0; i < per_class; ++i) jobs.push_back({split, label, i, split == 1 ? ++val_number : 0});
    }
  }
  std::vector<FileStats> stats(jobs.size());
  std::atomic<size_t> next{0}, done{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::exception_ptr failure;
  const auto start = std::chrono::steady_clock::now();
  auto work = [&] {
    try {
      JpegWriter writer;
      for (size_t j = next++; j < jobs.size() && !failed; j = next++) {
        const Job& job = jobs[j];
        const RealisticJpeg jpeg = make_realistic_jpeg(o.seed, job.split, job.label, job.index, writer);
        const fs::path path = file_path(root, o.seed, job);
        std::ofstream out(path, std::ios::binary);
        out.write(reinterpret_cast<const char*>(jpeg.bytes.data()), static_cast<std::streamsize>(jpeg.bytes.size()));
        out.close();
        DTRAIN_CHECK(out.good()) << "cannot write " << path.string();
        stats[j] = {jpeg.width,  jpeg.height,          jpeg.quality, jpeg.bytes.size(),
                    jpeg.colour, jpeg.subsampling_444, jpeg.encodes, jpeg.quality_moved};
        const size_t finished = ++done;
        const size_t tenth = std::max<size_t>(1, jobs.size() / 10);
        if (o.progress && (finished % tenth == 0 || finished == jobs.size())) {
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          std::printf("  %zu / %zu files, %.1f s, %.0f files/s\n", finished, jobs.size(), s,
                      static_cast<double>(finished) / s);
          std::fflush(stdout);
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!failure) failure = std::current_exception();
      failed = true;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) threads.emplace_back(work);
  for (std::thread& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summarize(stats, seconds);
}

std::string describe(const RealisticTreeSummary& s, int threads) {
  char text[1024];
  std::snprintf(text, sizeof(text),
                "%zu files, %.1f MiB in %.1f s on %d threads (%.1f files/s, %.2f files/s per thread, %.2f encodes "
                "per file)\n"
                "size: mean %.0fx%.0f; %zu files of 500x375 average %.1f KiB\n"
                "KiB: mean %.1f, min %.1f, p5 %.1f, median %.1f, p95 %.1f, max %.1f; %zu outside 30-150 KiB\n"
                "quality: mean %.1f, %d-%d (%zu moved out of the drawn quality to keep 30-150 KiB); greyscale %zu, "
                "CMYK (YCCK) %zu, 4:4:4 %zu, the rest 4:2:0\n",
                s.files, s.total_mib, s.seconds, threads, static_cast<double>(s.files) / s.seconds,
                static_cast<double>(s.files) / s.seconds / threads, s.encodes_per_file, s.mean_width, s.mean_height,
                s.files_500x375, s.mean_kib_500x375, s.mean_kib, s.min_kib, s.p5_kib, s.median_kib, s.p95_kib,
                s.max_kib, s.outside_30_150_kib, s.mean_quality, s.min_quality, s.max_quality, s.quality_moved, s.grey,
                s.cmyk, s.subsampling_444);
  return text;
}

}  // namespace dtrain::test
