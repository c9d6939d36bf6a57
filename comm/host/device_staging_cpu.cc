// DeviceStaging in builds without CUDA: device buffers cannot exist.
#include "comm/host/device_staging.h"
#include "runtime/base/error.h"

namespace dtrain::comm {

struct DeviceStaging::State {};

DeviceStaging::DeviceStaging(size_t, int) {}
DeviceStaging::~DeviceStaging() = default;

Work DeviceStaging::run(CommWorker&, const Collective& call, int, int, std::function<void(const Collective&)>,
                        std::function<void(const Collective&)>) {
  DTRAIN_USAGE_FAIL() << describe(call) << ": device buffers need a CUDA build of dtrain (DTRAIN_CUDA=ON)";
}

Work DeviceStaging::run_direct(CommWorker&, const Collective& call, std::function<void(const Collective&)>,
                               std::function<void(const Collective&)>) {
  DTRAIN_USAGE_FAIL() << describe(call) << ": device buffers need a CUDA build of dtrain (DTRAIN_CUDA=ON)";
}

}  // namespace dtrain::comm
