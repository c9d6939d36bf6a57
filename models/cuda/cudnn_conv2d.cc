#include "models/cuda/cudnn_conv2d.h"

#include <atomic>

#include "runtime/cuda/cuda_check.h"

namespace dtrain::models::cuda {

namespace {
std::atomic<size_t> largest_workspace{0};
}  // namespace

size_t CudnnConv2d::measurements_made() {
  return conv_plans_measured();
}

size_t CudnnConv2d::largest_workspace_bytes() {
  return largest_workspace.load();
}

CudnnConv2d::CudnnConv2d(cudnnHandle_t handle, const Conv2dShape& geometry, ConvNumerics numerics, bool allow_tf32)
    : handle_(handle), geometry_(geometry), numerics_(numerics), allow_tf32_(allow_tf32) {
  validate(geometry_);
}

const ConvPlan& CudnnConv2d::plan(ConvPass pass, bool accumulate, const ConvOperands& measure_on) {
  std::shared_ptr<const ConvPlan>& slot = pass == ConvPass::kForward        ? forward_
                                          : pass == ConvPass::kBackwardData ? backward_data_[accumulate ? 1 : 0]
                                                                            : backward_filter_;
  if (slot == nullptr) slot = conv_plan(handle_, {geometry_, numerics_, allow_tf32_, pass, accumulate}, measure_on);
  return *slot;
}

// The workspace is a device Buffer on the handle's stream. It goes back to the cache when the pass
// returns: the allocator hands it out again only for work on the same stream, which runs after
// the convolution.
void CudnnConv2d::run(const ConvPlan& chosen, const ConvOperands& operands) {
  cudaStream_t stream = nullptr;
  DTRAIN_CUDNN_CHECK(cudnnGetStream(handle_, &stream));
  const size_t bytes = static_cast<size_t>(chosen.workspace_bytes);
  size_t largest = largest_workspace.load();
  while (bytes > largest && !largest_workspace.compare_exchange_weak(largest, bytes)) {
  }
  runtime::Buffer space(runtime::MemoryKind::kDevice, bytes, stream);
  run_conv_plan(handle_, chosen, operands, space.data());
}

void CudnnConv2d::forward(const void* x, const void* w, void* y) {
  const ConvOperands operands{x, w, y};
  run(plan(ConvPass::kForward, false, operands), operands);
}

void CudnnConv2d::backward_data(const void* dy, const void* w, void* dx, bool accumulate) {
  const ConvOperands operands{dx, w, dy};
  // Measuring writes the output (several times); when dx already holds a gradient to add to,
  // measure on a scratch dx instead.
  runtime::Buffer measuring_output;
  ConvOperands measure_on = operands;
  if (accumulate && backward_data_[1] == nullptr) {
    const size_t element_bytes = numerics_ == ConvNumerics::kBf16Nhwc ? 2 : 4;
    measuring_output =
        runtime::Buffer(runtime::MemoryKind::kDevice, element_bytes * static_cast<size_t>(geometry_.input_size()));
    measure_on.x = measuring_output.data();
  }
  run(plan(ConvPass::kBackwardData, accumulate, measure_on), operands);
}

void CudnnConv2d::backward_filter(const void* x, const void* dy, void* dw) {
  const ConvOperands operands{x, dw, dy};
  run(plan(ConvPass::kBackwardFilter, false, operands), operands);
}

}  // namespace dtrain::models::cuda
