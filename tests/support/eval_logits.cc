// dtrain-eval-logits CHECKPOINT IMAGES.safetensors OUT.safetensors [WEIGHTS.safetensors]: dtrain's
// eval-mode logits of a checkpoint's network on given inputs, for comparing with another framework
// on the same batch (scripts/check_torchvision_weights.py: torchvision's ResNet-50 loaded from
// dtrain-export's file). With WEIGHTS (torchvision's names, --init-weights' reader) the network is
// the checkpoint's and the values are the file's: the import direction.
//   IMAGES.safetensors: "images", F32 [N, C, H, W], already normalized (what the network sees)
//   OUT.safetensors:    "logits", F32 [N, classes]
// The CPU reference network in fp32 (models/resnet.h), BN with its running statistics.
#include <cstdio>
#include <exception>
#include <string>

#include "models/resnet.h"
#include "runtime/base/error.h"
#include "runtime/io/safetensors.h"
#include "train/checkpoint/checkpoint_model.h"
#include "train/checkpoint/torchvision_weights.h"

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr,
                 "usage: dtrain-eval-logits CHECKPOINT IMAGES.safetensors OUT.safetensors [WEIGHTS.safetensors]\n");
    return 2;
  }
  try {
    using namespace dtrain;
    const train::CheckpointModel saved = train::read_checkpoint_model(argv[1]);
    models::ResNet net(saved.model);
    train::read_checkpoint_weights(argv[1], net.parameters());
    if (argc == 5)
      std::printf("dtrain-eval-logits: %s\n", train::import_torchvision_weights(argv[4], net.parameters(), {}).c_str());
    runtime::SafetensorsReader in(argv[2]);
    const runtime::SafetensorsEntry* images = in.find("images");
    DTRAIN_USAGE_CHECK(images != nullptr && images->dtype == "F32" && images->shape.size() == 4 &&
                       images->shape[1] == saved.model.in_channels)
        << argv[2] << ": needs \"images\", F32 [N, " << saved.model.in_channels << ", H, W]";
    runtime::Tensor x(runtime::DType::kF32, images->shape);
    in.read(*images, x.data<float>());
    const runtime::Tensor& logits = net.forward(x, false);
    runtime::write_safetensors(argv[3], {{"logits", "F32", logits.shape(), logits.data<float>()}},
                               {{"dtrain_checkpoint", argv[1]}});
    std::printf("dtrain-eval-logits: %lld x %lld logits of %s on %s -> %s\n", static_cast<long long>(logits.shape()[0]),
                static_cast<long long>(logits.shape()[1]), argv[1], argv[2], argv[3]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtrain-eval-logits: %s\n", e.what());
    return 1;
  }
  return 0;
}
