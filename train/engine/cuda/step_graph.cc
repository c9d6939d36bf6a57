#include "train/engine/cuda/step_graph.h"

#include <exception>

#include "runtime/base/error.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device_allocator.h"
#include "runtime/cuda/stream.h"

namespace dtrain::train::cuda {

StepGraphs::~StepGraphs() {
  try {
    clear();
  } catch (const std::exception&) {  // a destructor must not throw; the CUDA error shows elsewhere
  }
}

std::string StepGraphs::capture(int key, const std::function<void()>& queue) {
  DTRAIN_CHECK(!has(key)) << "step graph " << key << " captured twice";
  runtime::CachingAllocator& allocator = runtime::device_caching_allocator(device_);
  allocator.begin_graph_pool();
  const cudaError_t begun = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
  if (begun != cudaSuccess) {
    allocator.end_graph_pool();
    cudaGetLastError();
    return std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(begun);
  }
  std::string failure;
  try {
    queue();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  allocator.end_graph_pool();
  if (failure.empty() && ended != cudaSuccess)
    failure = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(ended);
  if (failure.empty()) {
    cudaGraphExec_t exec = nullptr;
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    if (made == cudaSuccess) {
      execs_[key] = exec;
      ++captures_;
    } else {
      failure = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(made);
    }
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  // An invalidated capture leaves its error behind; a sticky one shows again at the next check.
  if (!failure.empty()) cudaGetLastError();
  return failure;
}

void StepGraphs::launch(int key) {
  const auto found = execs_.find(key);
  DTRAIN_CHECK(found != execs_.end()) << "step graph " << key << " launched before its capture";
  DTRAIN_CUDA_CHECK(cudaGraphLaunch(found->second, stream_)) << "step graph " << key;
  ++launches_;
}

void StepGraphs::clear() {
  runtime::CachingAllocator& allocator = runtime::device_caching_allocator(device_);
  // The pool's blocks are tagged with the stream, so whoever gets them next queues after the
  // launches there; only the graphs themselves wait for their launches to end.
  if (execs_.empty()) {
    allocator.release_graph_pool();
    return;
  }
  runtime::DeviceGuard on(device_);
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_)) << "before dropping the step graphs";
  for (auto& [key, exec] : execs_) cudaGraphExecDestroy(exec);
  execs_.clear();
  allocator.release_graph_pool();
}

}  // namespace dtrain::train::cuda
