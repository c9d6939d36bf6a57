#include "train/data/crop_geometry.h"

#include <algorithm>
#include <cmath>

namespace dtrain::train {

CropRegion random_resized_crop(int image_width, int image_height, std::mt19937_64& rng,
                               const RandomResizedCropOptions& options) {
  const double area = static_cast<double>(image_width) * image_height;
  std::uniform_real_distribution<double> scale(options.min_scale, options.max_scale);
  std::uniform_real_distribution<double> log_ratio(std::log(options.min_ratio), std::log(options.max_ratio));
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * scale(rng);
    const double ratio = std::exp(log_ratio(rng));
    const int w = static_cast<int>(std::lround(std::sqrt(target_area * ratio)));
    const int h = static_cast<int>(std::lround(std::sqrt(target_area / ratio)));
    if (w > 0 && h > 0 && w <= image_width && h <= image_height) {
      const int x = std::uniform_int_distribution<int>(0, image_width - w)(rng);
      const int y = std::uniform_int_distribution<int>(0, image_height - h)(rng);
      return {static_cast<double>(x), static_cast<double>(y), static_cast<double>(w), static_cast<double>(h)};
    }
  }
  // Fallback: the whole image, its aspect ratio clamped into range, centred.
  const double in_ratio = static_cast<double>(image_width) / image_height;
  double w = image_width, h = image_height;
  if (in_ratio < options.min_ratio) {
    h = std::round(w / options.min_ratio);
  } else if (in_ratio > options.max_ratio) {
    w = std::round(h * options.max_ratio);
  }
  return {std::floor((image_width - w) / 2), std::floor((image_height - h) / 2), w, h};
}

CropRegion center_crop_after_resize(int image_width, int image_height, int resize, int crop) {
  const double shorter = std::min(image_width, image_height);
  const double side = std::min(shorter, shorter * crop / resize);
  return {(image_width - side) / 2, (image_height - side) / 2, side, side};
}

}  // namespace dtrain::train
