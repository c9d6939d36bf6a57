#pragma once
// An ImageNet-layout tree of realistic JPEGs (realistic_images.h), written by several threads:
//   <root>/train/<wnid>/<wnid>_<i>.JPEG and <root>/val/<wnid>/ILSVRC2012_val_<n>.JPEG
// with wnid-like class folders (n01440764 style). The bytes depend only on the seed and the counts,
// never on the thread count.
#include <cstddef>
#include <cstdint>
#include <string>

namespace dtrain::test {

struct RealisticTreeOptions {
  int classes = 100;
  int train_per_class = 138;
  int val_per_class = 10;
  uint64_t seed = 1;
  int threads = 1;
  bool progress = true;  // a line on stdout at every tenth of the files
};

struct RealisticTreeSummary {
  size_t files = 0;
  double mean_width = 0, mean_height = 0;
  double mean_kib = 0, min_kib = 0, max_kib = 0, p5_kib = 0, median_kib = 0, p95_kib = 0;
  double mean_kib_500x375 = 0;  // over the files of exactly 500x375 (0 when none)
  size_t files_500x375 = 0;
  size_t grey = 0, cmyk = 0, subsampling_444 = 0, outside_30_150_kib = 0, quality_moved = 0;
  int min_quality = 0, max_quality = 0;
  double mean_quality = 0, encodes_per_file = 0;
  double seconds = 0;
  double total_mib = 0;
};

// `root` must not exist or be empty. Throws with the path when a file cannot be written.
RealisticTreeSummary write_realistic_tree(const std::string& root, const RealisticTreeOptions& options);

// The summary as lines of text for the terminal.
std::string describe(const RealisticTreeSummary& summary, int threads);

// The class folder name of `label`: "n" and eight digits, distinct and sorted like the labels.
std::string wnid(uint64_t seed, int label);

}  // namespace dtrain::test
