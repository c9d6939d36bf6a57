// dtrain-export: a checkpoint's weights as a file other tools read.
//   dtrain-export runs/x/ckpt-100-....dtrain --format safetensors resnet50.safetensors
// The file holds torchvision's state_dict (torchvision_weights.h): for ResNet-50,
//   torchvision.models.resnet50().load_state_dict(safetensors.torch.load_file(...))
// takes it with strict=True. No MPI, no GPU, no data: the network comes from the checkpoint's
// header.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "models/resnet.h"
#include "runtime/base/cli.h"
#include "runtime/base/error.h"
#include "runtime/base/version.h"
#include "runtime/mpi/main_guard.h"
#include "train/checkpoint/checkpoint_model.h"
#include "train/checkpoint/torchvision_weights.h"

namespace dtrain::train {
namespace {

namespace po = runtime::po;

// "resnet50", "small-resnet [1, 1, 1] width 16 (basic blocks)": what the file holds.
std::string describe(const models::ResNetConfig& m) {
  if (m.small_input || !m.blocks_per_stage.empty()) {
    std::string stages;
    for (size_t i = 0; i < m.blocks_per_stage.size(); ++i)
      stages += (i ? ", " : "") + std::to_string(m.blocks_per_stage[i]);
    return std::string(m.small_input ? "small-resnet" : "resnet") + " [" + stages + "] width " +
           std::to_string(m.width) + (m.bottleneck ? " (bottlenecks)" : " (basic blocks)");
  }
  return "resnet" + std::to_string(m.depth);
}

int export_main(int argc, char** argv) {
  po::options_description options("dtrain-export CHECKPOINT --format safetensors OUT");
  options.add_options()("format", po::value<std::string>()->default_value("safetensors"),
                        "the output format: safetensors (torchvision's state_dict names and layouts)")(
      "num-classes", po::value<int>()->default_value(0),
      "the model's class count, for checkpoints of older dtrain versions that do not record it")(
      "in-channels", po::value<int>()->default_value(0), "the model's input channels, likewise");
  po::options_description hidden;
  hidden.add_options()("paths", po::value<std::vector<std::string>>());
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("paths", -1);
  const runtime::ParsedCommandLine cli = runtime::parse_command_line(argc, argv, all, &positional);
  if (cli.help) {
    std::cout << runtime::usage("dtrain-export", options, "CHECKPOINT --format safetensors OUT")
              << "\nWrites a checkpoint's weights (parameters, BN running statistics) under torchvision's\n"
                 "state_dict names and layouts, for PyTorch and other tools: ResNet-18/34/50/101/152 load into\n"
                 "torchvision.models.resnet<depth>() with strict=True. --init-weights FILE of dtrain-train reads\n"
                 "the file back.\n";
    return 0;
  }
  const std::vector<std::string> paths =
      cli.values.count("paths") ? cli.values["paths"].as<std::vector<std::string>>() : std::vector<std::string>{};
  DTRAIN_USAGE_CHECK(paths.size() == 2) << "dtrain-export: give a CHECKPOINT and an OUT file, got " << paths.size()
                                        << " argument(s) (dtrain-export CHECKPOINT --format safetensors OUT)";
  const std::string format = cli.values["format"].as<std::string>();
  DTRAIN_USAGE_CHECK(format == "safetensors") << "--format " << format << ": the one format is safetensors";
  const std::string& checkpoint = paths[0];
  const std::string& out = paths[1];
  std::error_code ec;
  DTRAIN_USAGE_CHECK(!std::filesystem::equivalent(checkpoint, out, ec))
      << "dtrain-export: OUT " << out << " is the checkpoint itself";
  DTRAIN_USAGE_CHECK(!std::filesystem::is_directory(out)) << "dtrain-export: OUT " << out << " is a directory";
  const int classes = cli.values["num-classes"].as<int>();
  const int channels = cli.values["in-channels"].as<int>();
  DTRAIN_USAGE_CHECK(classes >= 0 && channels >= 0) << "--num-classes and --in-channels must not be negative";

  const CheckpointModel saved = read_checkpoint_model(checkpoint, classes, channels);
  models::ResNet net(saved.model);
  read_checkpoint_weights(checkpoint, net.parameters());
  const std::string model = describe(saved.model);
  // What PyTorch's num_batches_tracked counts: BN forward passes in training mode, one per
  // micro-batch (accumulation_steps of them per step; read_checkpoint gives older configs 1).
  const int64_t tracked = saved.header.global_step() * saved.header.config().accumulation_steps();
  const runtime::SafetensorsMetadata metadata = {
      {"format", "pt"},
      {"dtrain_version", DTRAIN_VERSION_STRING},
      {"dtrain_model", model},
      {"dtrain_num_classes", std::to_string(saved.model.num_classes)},
      {"dtrain_in_channels", std::to_string(saved.model.in_channels)},
      {"dtrain_global_step", std::to_string(saved.header.global_step())},
      {"dtrain_checkpoint", std::filesystem::path(checkpoint).filename().string()}};
  export_torchvision_weights(out, net.parameters(), tracked, metadata);
  std::cout << "dtrain-export: wrote " << out << ": " << model << ", " << saved.model.num_classes << " classes, "
            << net.parameters().parameter_count() << " parameters, BN state and num_batches_tracked " << tracked
            << " under torchvision's names, from " << checkpoint << " (step " << saved.header.global_step() << ")\n";
  return 0;
}

}  // namespace
}  // namespace dtrain::train

int main(int argc, char** argv) {
  return dtrain::runtime::run_main_without_mpi(argc, argv, dtrain::train::export_main);
}
