#pragma once
// Where in an image a training or validation sample is cut from, in the image's own pixel
// coordinates. Both ImageNet recipes reduce to "this rectangle, resized to the output size":
//  - training: RandomResizedCrop (Szegedy et al., as torchvision does it): area 8%..100% of the
//    image, aspect ratio 3/4..4/3 (log-uniform), 10 tries, then a centre crop with the ratio clamped;
//  - validation: resize the shorter side to `resize`, then a centre crop of `crop` — in the
//    original image, a centred square of side shorter_side x crop / resize.
#include <random>

namespace dtrain::train {

struct CropRegion {
  double x = 0, y = 0, width = 0, height = 0;  // may be fractional (validation)
};

struct RandomResizedCropOptions {
  double min_scale = 0.08, max_scale = 1.0;
  double min_ratio = 3.0 / 4.0, max_ratio = 4.0 / 3.0;
};

CropRegion random_resized_crop(int image_width, int image_height, std::mt19937_64& rng,
                               const RandomResizedCropOptions& options = {});

CropRegion center_crop_after_resize(int image_width, int image_height, int resize, int crop);

}  // namespace dtrain::train
