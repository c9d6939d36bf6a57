// Builds without CUDA: asking for the GPU engine is a usage error that says why.
#include "runtime/base/error.h"
#include "train/engine/step_engine.h"

namespace dtrain::train {

std::unique_ptr<StepEngine> make_gpu_step_engine(const EngineSetup&, const runtime::RankContext&, int gpu) {
  DTRAIN_USAGE_FAIL() << "device gpu (GPU " << gpu << "): this dtrain was built without CUDA";
}

}  // namespace dtrain::train
