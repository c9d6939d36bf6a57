#include "train/data/datasets.h"

#include <algorithm>
#include <string>

#include "runtime/base/error.h"
#include "train/data/idx_dataset.h"
#include "train/data/image_folder_dataset.h"
#include "train/data/synthetic_dataset.h"

namespace dtrain::train {

Datasets open_datasets(const ResolvedConfig& config) {
  const TrainConfig& c = config.fields;
  Datasets d;
  switch (config.dataset) {
    case DatasetKind::kFashionMnist: {
      const std::string dir = c.data_dir().empty() ? "/usr/share/datasets/fashion-mnist" : c.data_dir();
      d.train =
          std::make_unique<IdxDataset>(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz", true);
      d.validation =
          std::make_unique<IdxDataset>(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz", false);
      break;
    }
    case DatasetKind::kImageNet: {
      ImageFolderOptions folder;
      folder.crop = c.image_size();
      folder.resize = c.val_resize();
      folder.max_bad_fraction = c.max_bad_fraction();
      folder.max_file_bytes = int64_t{c.max_file_mib()} << 20;
      folder.max_image_pixels = static_cast<int64_t>(c.max_image_megapixels() * 1e6);
      auto train = std::make_unique<ImageFolderDataset>(c.data_dir() + "/train", folder);
      folder.train = false;
      auto val = std::make_unique<ImageFolderDataset>(c.data_dir() + "/val", folder);
      DTRAIN_USAGE_CHECK(val->classes() == train->classes())
          << c.data_dir() << ": val/ and train/ hold different class folders (" << val->num_classes() << " and "
          << train->num_classes() << ")";
      d.train = std::move(train);
      d.validation = std::move(val);
      break;
    }
    case DatasetKind::kSynthetic: {
      const ImageShape shape{c.image_size(), c.image_size(), 3};
      d.train = std::make_unique<SyntheticDataset>(c.synthetic_samples(), shape, 1000, c.seed());
      d.validation =
          std::make_unique<SyntheticDataset>(std::max(1, c.synthetic_samples() / 8), shape, 1000, c.seed() + 1);
      break;
    }
  }
  return d;
}

}  // namespace dtrain::train
