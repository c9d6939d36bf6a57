// dtrain-make-image-tree: ImageNet-layout trees of JPEGs.
//   dtrain-make-image-tree DIR [--clean]
//       the small test tree (tests/support/image_tree.h) for the command-line tests of dtrain-train's
//       image-folder path; DIR is replaced. --clean: no corrupt or non-image files.
//   dtrain-make-image-tree DIR --realistic [--classes 100 --train-per-class 138 --val-per-class 10
//                          --seed 1 --threads N] [--overwrite]
//       photo-like JPEGs with ImageNet's sizes and file sizes (tests/support/realistic_images.h),
//       for loader tests and benchmarks; prints what it wrote.
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "runtime/base/cli.h"
#include "runtime/base/error.h"
#include "runtime/mpi/main_guard.h"
#include "tests/support/image_tree.h"
#include "tests/support/realistic_tree.h"

namespace {

namespace po = dtrain::runtime::po;
namespace fs = std::filesystem;

int make_tree(int argc, char** argv) {
  std::string dir;
  bool clean = false, realistic = false, overwrite = false;
  dtrain::test::RealisticTreeOptions tree;
  tree.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  po::options_description d("dtrain-make-image-tree DIR [options]");
  d.add_options()("dir", po::value(&dir), "the tree to write (also the first positional argument)")(
      "clean", po::value(&clean)->implicit_value(true)->default_value(false),
      "test tree: no corrupt file, non-image or empty class folder")(
      "realistic", po::value(&realistic)->implicit_value(true)->default_value(false),
      "photo-like JPEGs of ImageNet's sizes and file sizes")(
      "classes", po::value(&tree.classes)->default_value(tree.classes), "--realistic: class folders (1-1000)")(
      "train-per-class", po::value(&tree.train_per_class)->default_value(tree.train_per_class),
      "--realistic: images per class in train/")(
      "val-per-class", po::value(&tree.val_per_class)->default_value(tree.val_per_class),
      "--realistic: images per class in val/")("seed", po::value(&tree.seed)->default_value(tree.seed),
                                               "--realistic: the tree is a function of the seed and the counts")(
      "threads", po::value(&tree.threads)->default_value(tree.threads), "--realistic: writer threads")(
      "overwrite", po::value(&overwrite)->implicit_value(true)->default_value(false),
      "--realistic: replace DIR if it exists and is not empty");
  po::positional_options_description positional;
  positional.add("dir", 1);
  const dtrain::runtime::ParsedCommandLine parsed = dtrain::runtime::parse_command_line(argc, argv, d, &positional);
  if (parsed.help) {
    std::printf(
        "usage: dtrain-make-image-tree DIR [--clean]\n"
        "       dtrain-make-image-tree DIR --realistic [--classes N --train-per-class N --val-per-class N "
        "--seed S --threads N] [--overwrite]\n%s",
        dtrain::runtime::usage("dtrain-make-image-tree", d).c_str());
    return 0;
  }
  DTRAIN_USAGE_CHECK(!dir.empty()) << "dtrain-make-image-tree: DIR is missing (run with --help for usage)";

  if (!realistic) {
    for (const char* flag : {"classes", "train-per-class", "val-per-class", "seed", "threads"}) {
      DTRAIN_USAGE_CHECK(parsed.values[flag].defaulted()) << "--" << flag << " needs --realistic";
    }
    DTRAIN_USAGE_CHECK(!overwrite) << "--overwrite needs --realistic (the test tree always replaces DIR)";
    fs::remove_all(dir);
    dtrain::test::ImageTreeSpec spec;
    spec.train_per_class = 16;
    spec.val_per_class = 4;
    spec.plant_bad_files = !clean;
    dtrain::test::write_image_tree(dir, spec);
    return 0;
  }

  DTRAIN_USAGE_CHECK(tree.classes >= 1 && tree.classes <= 1000) << "--classes " << tree.classes << ": expected 1-1000";
  DTRAIN_USAGE_CHECK(tree.train_per_class >= 0) << "--train-per-class " << tree.train_per_class << ": negative";
  DTRAIN_USAGE_CHECK(tree.val_per_class >= 0) << "--val-per-class " << tree.val_per_class << ": negative";
  DTRAIN_USAGE_CHECK(tree.train_per_class + tree.val_per_class > 0) << "--train-per-class and --val-per-class are 0";
  DTRAIN_USAGE_CHECK(tree.threads >= 1 && tree.threads <= 1024) << "--threads " << tree.threads << ": expected 1-1024";
  if (fs::exists(dir) && !(fs::is_directory(dir) && fs::is_empty(dir))) {
    DTRAIN_USAGE_CHECK(overwrite) << dir << " exists and is not an empty directory; --overwrite replaces it";
    fs::remove_all(dir);
  }
  std::printf(
      "# dtrain-make-image-tree: %d classes x (%d train + %d val) realistic JPEGs, seed %llu, %d threads -> %s\n",
      tree.classes, tree.train_per_class, tree.val_per_class, static_cast<unsigned long long>(tree.seed), tree.threads,
      dir.c_str());
  std::fflush(stdout);
  const dtrain::test::RealisticTreeSummary summary = dtrain::test::write_realistic_tree(dir, tree);
  std::printf("%s", dtrain::test::describe(summary, tree.threads).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return dtrain::runtime::run_main(argc, argv, make_tree);
}
