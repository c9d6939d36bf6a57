#pragma once
// Writes a small ImageNet-layout tree of real JPEGs for tests: <root>/{train,val}/<class>/*.JPEG.
// Each class has its own colour with noise and a class-specific stripe, so a model can tell the
// classes apart. Image sizes vary, to exercise crops of non-square images. Optionally plants one
// corrupt JPEG (train/class_b/broken.JPEG), one non-image (train/class_c/notes.txt) and one empty
// class folder (class_d, in both splits so the class lists still agree).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "train/data/jpeg_decoder.h"

namespace dtrain::test {

struct ImageTreeSpec {
  int classes = 3;
  int train_per_class = 6;
  int val_per_class = 2;
  bool plant_bad_files = true;
};

inline void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<uint8_t> class_image(int label, int width, int height, std::mt19937& rng) {
  static const int colours[][3] = {{200, 40, 40}, {40, 200, 40}, {40, 40, 200}, {200, 200, 40}, {40, 200, 200}};
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  std::uniform_int_distribution<int> noise(-30, 30);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const bool stripe = ((x + y * label) / 8) % 2 == 0;
      for (int c = 0; c < 3; ++c) {
        const int v = colours[label % 5][c] + noise(rng) + (stripe ? 20 : -20);
        rgb[(static_cast<size_t>(y) * width + x) * 3 + c] = static_cast<uint8_t>(std::clamp(v, 0, 255));
      }
    }
  }
  return rgb;
}

inline void write_image_tree(const std::string& root, const ImageTreeSpec& spec, unsigned seed = 7) {
  namespace fs = std::filesystem;
  std::mt19937 rng(seed);
  for (const char* split : {"train", "val"}) {
    const int per_class = std::string(split) == "train" ? spec.train_per_class : spec.val_per_class;
    for (int label = 0; label < spec.classes; ++label) {
      const fs::path dir = fs::path(root) / split / ("class_" + std::string(1, static_cast<char>('a' + label)));
      fs::create_directories(dir);
      for (int i = 0; i < per_class; ++i) {
        const int width = 48 + static_cast<int>(rng() % 40), height = 40 + static_cast<int>(rng() % 40);
        const std::vector<uint8_t> rgb = class_image(label, width, height, rng);
        write_bytes(dir / ("img_" + std::to_string(i) + ".JPEG"), train::encode_jpeg(rgb.data(), width, height, 90));
      }
    }
    if (spec.plant_bad_files) fs::create_directories(fs::path(root) / split / "class_d");
  }
  if (spec.plant_bad_files) {
    std::vector<uint8_t> broken = {0xFF, 0xD8, 0xFF, 0xE0};  // a JPEG start, then garbage
    for (int i = 0; i < 200; ++i) broken.push_back(static_cast<uint8_t>(rng()));
    write_bytes(fs::path(root) / "train" / "class_b" / "broken.JPEG", broken);
    std::ofstream(fs::path(root) / "train" / "class_c" / "notes.txt") << "not an image\n";
  }
}

}  // namespace dtrain::test
