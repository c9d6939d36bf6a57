// Weights other tools read: dtrain's ResNet under torchvision's state_dict names
// and layouts in safetensors, a checkpoint exported and imported back bit for bit, and every file
// that does not fit the model refused naming the tensor.
#include "train/checkpoint/torchvision_weights.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "models/resnet.h"
#include "runtime/base/error.h"
#include "tests/support/test_seed.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/checkpoint_model.h"
#include "train/config/resolved_config.h"
#include "train/config/train_config.h"

namespace dtrain::train {
namespace {

namespace fs = std::filesystem;

std::string usage_error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const runtime::UsageError& e) {
    return e.detail();
  }
  return "";
}

// Every parameter and BN state value of `params` from `rng` (running_var positive).
void randomize(models::ParameterSet& params, std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  for (size_t id = 0; id < params.slots().size(); ++id) {
    float* p = params.param(static_cast<int>(id));
    for (int64_t i = 0; i < params.slots()[id].numel; ++i) p[i] = normal(rng);
  }
  for (size_t id = 0; id < params.state_slots().size(); ++id) {
    float* s = params.state(static_cast<int>(id));
    for (int64_t i = 0; i < params.state_slots()[id].numel; ++i) s[i] = 0.5f + std::fabs(normal(rng));
  }
}

bool same_bits(models::ParameterSet& a, models::ParameterSet& b) {
  return a.flat_size() == b.flat_size() && a.state_count() == b.state_count() &&
         std::memcmp(a.params_flat(), b.params_flat(), static_cast<size_t>(a.flat_size()) * 4) == 0 &&
         std::memcmp(a.state_flat(), b.state_flat(), static_cast<size_t>(a.state_count()) * 4) == 0;
}

// A tensor of a file, held in memory so a test can damage it and write it again.
struct HeldTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<char> bytes;
};

std::vector<HeldTensor> read_all(const std::string& path) {
  runtime::SafetensorsReader reader(path);
  std::vector<HeldTensor> out;
  for (const runtime::SafetensorsEntry& e : reader.entries()) {
    out.push_back({e.name, e.dtype, e.shape, std::vector<char>(e.bytes())});
    reader.read(e, out.back().bytes.data());
  }
  return out;
}

void write_all(const std::string& path, const std::vector<HeldTensor>& tensors) {
  std::vector<runtime::SafetensorsView> views;
  for (const HeldTensor& t : tensors) views.push_back({t.name, t.dtype, t.shape, t.bytes.data()});
  runtime::write_safetensors(path, views, {});
}

HeldTensor& named(std::vector<HeldTensor>& tensors, const std::string& name) {
  for (HeldTensor& t : tensors) {
    if (t.name == name) return t;
  }
  throw std::runtime_error("no tensor " + name);
}

class TorchvisionWeights : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dtrain_tv_weights_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// torchvision.models.resnet50().state_dict(): 320 tensors, 53 BN layers (each with
// num_batches_tracked, int64, a scalar), v1.5 shapes, the classifier [1000, 2048].
TEST_F(TorchvisionWeights, ResNet50HasTorchvisionsStateDictKeysAndShapes) {
  models::ResNetConfig config;
  config.depth = 50;
  models::ResNet net(config);
  export_torchvision_weights(path("r50.safetensors"), net.parameters(), 7, {});
  runtime::SafetensorsReader reader(path("r50.safetensors"));
  EXPECT_EQ(reader.entries().size(), 320u);
  size_t tracked = 0;
  for (const runtime::SafetensorsEntry& e : reader.entries()) {
    if (e.name.size() > 20 && e.name.compare(e.name.size() - 20, 20, ".num_batches_tracked") == 0) {
      ++tracked;
      EXPECT_EQ(e.dtype, "I64") << e.name;
      EXPECT_TRUE(e.shape.empty()) << e.name;
      int64_t value = 0;
      reader.read(e, &value);
      EXPECT_EQ(value, 7) << e.name;
    } else {
      EXPECT_EQ(e.dtype, "F32") << e.name;
    }
  }
  EXPECT_EQ(tracked, 53u);
  const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"conv1.weight", {64, 3, 7, 7}},
      {"bn1.running_var", {64}},
      {"layer1.0.conv1.weight", {64, 64, 1, 1}},
      {"layer1.0.downsample.0.weight", {256, 64, 1, 1}},
      {"layer1.0.downsample.1.running_mean", {256}},
      {"layer2.0.conv2.weight", {128, 128, 3, 3}},
      {"layer3.5.bn3.weight", {1024}},
      {"layer4.2.conv3.weight", {2048, 512, 1, 1}},
      {"layer4.2.bn3.running_var", {2048}},
      {"fc.weight", {1000, 2048}},
      {"fc.bias", {1000}}};
  for (const auto& [name, shape] : shapes) {
    const runtime::SafetensorsEntry* e = reader.find(name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->shape, shape) << name;
  }
  EXPECT_EQ(reader.find("layer1.1.downsample.0.weight"), nullptr) << "only a stage's first block has a shortcut";
}

// torchvision.models.resnet18().state_dict(): 122 tensors (basic blocks, 20 BN layers).
TEST_F(TorchvisionWeights, ResNet18HasTorchvisionsTensorCount) {
  models::ResNetConfig config;
  config.depth = 18;
  models::ResNet net(config);
  export_torchvision_weights(path("r18.safetensors"), net.parameters(), 0, {});
  runtime::SafetensorsReader reader(path("r18.safetensors"));
  EXPECT_EQ(reader.entries().size(), 122u);
  ASSERT_NE(reader.find("layer2.0.conv1.weight"), nullptr);
  EXPECT_EQ(reader.find("layer2.0.conv1.weight")->shape, (std::vector<int64_t>{128, 64, 3, 3}));
}

// A checkpoint (the flat buffers in dtrain's layout), exported and imported into a fresh network:
// every parameter and BN statistic bit for bit, num_batches_tracked the checkpoint's step.
TEST_F(TorchvisionWeights, CheckpointExportedAndImportedBackBitForBit) {
  std::mt19937_64 rng(test::random_seed());
  TrainConfig c = default_train_config();
  c.set_depth(18);
  c.set_model("small-resnet");
  c.add_blocks_per_stage(1);
  c.add_blocks_per_stage(2);
  c.set_width(8);
  const models::ResNetConfig model = resnet_config(resolve(c), 7, 3);
  models::ResNet trained(model);
  randomize(trained.parameters(), rng);
  std::vector<float> momentum(static_cast<size_t>(trained.parameters().flat_size()), 0.25f);
  proto::CheckpointHeader header;
  *header.mutable_config() = c;
  header.set_run_id(new_run_id());
  header.set_global_step(321);
  header.set_num_classes(7);
  header.set_in_channels(3);
  models::ParameterSet& p = trained.parameters();
  const std::string ckpt = write_checkpoint(dir_.string(), header,
                                            {{"params", p.params_flat(), static_cast<size_t>(p.flat_size())},
                                             {"momentum", momentum.data(), momentum.size()},
                                             {"bn_state", p.state_flat(), static_cast<size_t>(p.state_count())}},
                                            1);

  const CheckpointModel saved = read_checkpoint_model(ckpt);
  EXPECT_EQ(saved.model.num_classes, 7);
  EXPECT_EQ(saved.model.in_channels, 3);
  models::ResNet exported(saved.model);
  read_checkpoint_weights(ckpt, exported.parameters());
  export_torchvision_weights(path("w.safetensors"), exported.parameters(), saved.header.global_step(), {});

  models::ResNet imported(model);
  EXPECT_FALSE(same_bits(imported.parameters(), trained.parameters())) << "the test starts from other values";
  const std::string summary = import_torchvision_weights(path("w.safetensors"), imported.parameters(), {});
  EXPECT_TRUE(same_bits(imported.parameters(), trained.parameters())) << "not bit for bit after the round trip";
  EXPECT_NE(summary.find(path("w.safetensors")), std::string::npos) << summary;
  int64_t tracked = 0;
  runtime::SafetensorsReader reader(path("w.safetensors"));
  reader.read(*reader.find("bn1.num_batches_tracked"), &tracked);
  EXPECT_EQ(tracked, 321);

  // A class count the header contradicts is named.
  EXPECT_NE(usage_error_of([&] { read_checkpoint_model(ckpt, 10); }).find("holds a model of 7 classes, not 10"),
            std::string::npos);
}

// A checkpoint from before accumulation_steps, bn_sync_group and timeline_steps existed stores
// them as proto3's zero: it still rebuilds and exports (K = 1, no BN groups), num_batches_tracked
// counting one forward pass per step.
TEST_F(TorchvisionWeights, ACheckpointFromBeforeTheNewerFieldsExports) {
  TrainConfig c = default_train_config();
  c.set_model("small-resnet");
  c.add_blocks_per_stage(1);
  c.set_width(4);
  c.set_dataset("fashion-mnist");
  const models::ResNetConfig model = resnet_config(resolve(c), 10, 1);
  c.clear_accumulation_steps();
  c.clear_bn_sync_group();
  c.clear_timeline_steps();
  models::ResNet trained(model);
  proto::CheckpointHeader header;
  *header.mutable_config() = c;  // as an older dtrain wrote it: no num_classes, no in_channels either
  header.set_run_id(new_run_id());
  header.set_global_step(40);
  models::ParameterSet& p = trained.parameters();
  std::vector<float> momentum(static_cast<size_t>(p.flat_size()), 0.0f);
  const std::string ckpt = write_checkpoint(dir_.string(), header,
                                            {{"params", p.params_flat(), static_cast<size_t>(p.flat_size())},
                                             {"momentum", momentum.data(), momentum.size()},
                                             {"bn_state", p.state_flat(), static_cast<size_t>(p.state_count())}},
                                            1);
  const CheckpointModel saved = read_checkpoint_model(ckpt);
  EXPECT_EQ(saved.header.config().accumulation_steps(), 1);
  EXPECT_EQ(saved.header.config().bn_sync_group(), 1);
  EXPECT_EQ(saved.header.config().timeline_steps(), default_train_config().timeline_steps());
  EXPECT_EQ(saved.model.num_classes, 10);
  EXPECT_EQ(saved.model.in_channels, 1);
  models::ResNet exported(saved.model);
  read_checkpoint_weights(ckpt, exported.parameters());
  EXPECT_TRUE(same_bits(exported.parameters(), trained.parameters()));
}

TEST_F(TorchvisionWeights, FilesThatDoNotFitTheModelAreRefusedNamingTheTensor) {
  std::mt19937_64 rng(test::random_seed());
  models::ResNetConfig config;
  config.depth = 18;
  config.num_classes = 10;
  models::ResNet source(config);
  randomize(source.parameters(), rng);
  export_torchvision_weights(path("good.safetensors"), source.parameters(), 5, {});
  const std::vector<HeldTensor> good = read_all(path("good.safetensors"));

  models::ResNet target(config);
  const std::vector<float> before(target.parameters().params_flat(),
                                  target.parameters().params_flat() + target.parameters().flat_size());
  auto refusal = [&](const std::string& name, const std::function<void(std::vector<HeldTensor>&)>& damage) {
    std::vector<HeldTensor> tensors = good;
    damage(tensors);
    write_all(path(name), tensors);
    return usage_error_of([&] { import_torchvision_weights(path(name), target.parameters(), {}); });
  };
  const std::vector<std::tuple<std::string, std::function<void(std::vector<HeldTensor>&)>, std::string>> cases = {
      {"missing.safetensors",
       [](auto& t) { std::erase_if(t, [](const HeldTensor& h) { return h.name == "layer3.1.bn2.running_var"; }); },
       "tensor layer3.1.bn2.running_var of the model is not in the file"},
      {"extra.safetensors",
       [](auto& t) {
         t.push_back({"layer5.0.conv1.weight", "F32", {1}, std::vector<char>(4)});
       },
       "tensor layer5.0.conv1.weight is not in the model"},
      {"shape.safetensors",
       [](auto& t) {
         named(t, "layer2.0.conv1.weight").shape = {128, 64, 9, 1};
       },
       "tensor layer2.0.conv1.weight has shape [128, 64, 9, 1], the model [128, 64, 3, 3]"},
      {"dtype.safetensors",
       [](auto& t) {
         HeldTensor& h = named(t, "conv1.weight");
         h.dtype = "F16";
         h.bytes.resize(h.bytes.size() / 2);
       },
       "tensor conv1.weight is F16, the model takes F32"},
      {"tracked.safetensors", [](auto& t) { named(t, "bn1.num_batches_tracked").dtype = "F64"; },
       "tensor bn1.num_batches_tracked is F64, the model takes I64"},
  };
  for (const auto& [name, damage, expected] : cases) {
    const std::string error = refusal(name, damage);
    EXPECT_NE(error.find(expected), std::string::npos) << name << " refused with: '" << error << "'";
    EXPECT_NE(error.find(name), std::string::npos) << "the error names the file: " << error;
  }
  EXPECT_EQ(std::memcmp(before.data(), target.parameters().params_flat(), before.size() * 4), 0)
      << "a refused file changed the parameters";
}

// Fine-tuning: a file of another class count is refused naming the classifier, unless
// reinit_classifier keeps the model's own classifier and takes everything else from the file.
TEST_F(TorchvisionWeights, AnotherClassCountNeedsReinitClassifier) {
  std::mt19937_64 rng(test::random_seed());
  models::ResNetConfig pretrained_config;
  pretrained_config.depth = 18;
  pretrained_config.num_classes = 1000;
  models::ResNet pretrained(pretrained_config);
  randomize(pretrained.parameters(), rng);
  export_torchvision_weights(path("imagenet.safetensors"), pretrained.parameters(), 0, {});

  models::ResNetConfig config = pretrained_config;
  config.num_classes = 10;
  models::ResNet target(config);
  const std::string error =
      usage_error_of([&] { import_torchvision_weights(path("imagenet.safetensors"), target.parameters(), {}); });
  EXPECT_NE(error.find("tensor fc."), std::string::npos) << error;
  EXPECT_NE(error.find("--reinit-classifier"), std::string::npos) << error;

  models::ResNet fresh(config);  // the same seed: the classifier the target starts with
  WeightImport options;
  options.reinit_classifier = true;
  const std::string summary = import_torchvision_weights(path("imagenet.safetensors"), target.parameters(), options);
  EXPECT_NE(summary.find("classifier fc initialized afresh"), std::string::npos) << summary;
  models::ParameterSet& t = target.parameters();
  for (size_t id = 0; id < t.slots().size(); ++id) {
    const models::ParamSlot& slot = t.slots()[id];
    const bool head = slot.name.rfind("fc.", 0) == 0;
    const float* expected = head ? fresh.parameters().param(static_cast<int>(id))
                                 : pretrained.parameters().param(pretrained.parameters().find(slot.name));
    EXPECT_EQ(std::memcmp(t.param(static_cast<int>(id)), expected, static_cast<size_t>(slot.numel) * 4), 0)
        << slot.name << (head ? " is not the model's own initialization" : " is not the file's");
  }
  EXPECT_EQ(std::memcmp(t.state_flat(), pretrained.parameters().state_flat(), static_cast<size_t>(t.state_count()) * 4),
            0)
      << "BN running statistics are not the file's";
}

}  // namespace
}  // namespace dtrain::train
