// dtrain-make-image-tree DIR [--clean]: writes the test ImageNet-layout tree (tests/support/image_tree.h)
// for the command-line tests of dtrain-train's image-folder path.
#include <cstdio>
#include <filesystem>
#include <string>

#include "tests/support/image_tree.h"

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 3 && std::string(argv[2]) == "--clean")) {
    std::fprintf(stderr, "usage: %s DIR [--clean]  (--clean: no corrupt or non-image files)\n", argv[0]);
    return 2;
  }
  std::filesystem::remove_all(argv[1]);
  dtrain::test::ImageTreeSpec spec;
  spec.train_per_class = 16;
  spec.val_per_class = 4;
  spec.plant_bad_files = argc == 2;
  dtrain::test::write_image_tree(argv[1], spec);
  return 0;
}
