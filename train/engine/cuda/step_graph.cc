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
  DTRAIN_CHECK(!has(key) && !capturing_) << "step graph " << key << " captured twice";
  runtime::CachingAllocator& allocator = runtime::device_caching_allocator(device_);
  allocator.begin_graph_pool();
  pooled_ = true;
  std::string failure;
  const cudaError_t begun = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
  if (begun != cudaSuccess) failure = std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(begun);
  capturing_ = begun == cudaSuccess;
  if (failure.empty()) {
    try {
      queue();
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  if (capturing_) {
    try {
      end_segment();
    } catch (const std::exception& e) {
      if (failure.empty()) failure = e.what();
    }
  }
  allocator.end_graph_pool();
  std::vector<cudaGraphExec_t> execs;
  for (cudaGraph_t graph : captured_) {
    cudaGraphExec_t exec = nullptr;
    if (failure.empty() && graph != nullptr) {
      const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
      if (made != cudaSuccess) failure = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(made);
    }
    execs.push_back(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
  captured_.clear();
  if (!failure.empty()) {
    for (cudaGraphExec_t exec : execs) {
      if (exec != nullptr) cudaGraphExecDestroy(exec);
    }
    // An invalidated capture leaves its error behind; a sticky one shows again at the next check.
    cudaGetLastError();
    return failure;
  }
  execs_[key] = std::move(execs);
  ++captures_;
  return failure;
}

void StepGraphs::end_segment() {
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  if (ended != cudaSuccess) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    DTRAIN_CUDA_CHECK(ended) << "cudaStreamEndCapture of a step graph";
  }
  size_t nodes = 0;
  DTRAIN_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
  if (nodes == 0) {
    cudaGraphDestroy(graph);
    graph = nullptr;
  }
  captured_.push_back(graph);
}

void StepGraphs::cut() {
  DTRAIN_CHECK(capturing_) << "a step graph cut outside a capture";
  end_segment();
  DTRAIN_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal)) << "the next step graph";
  capturing_ = true;
}

void StepGraphs::launch(int key, size_t segment) {
  const auto found = execs_.find(key);
  DTRAIN_CHECK(found != execs_.end() && segment < found->second.size())
      << "step graph " << key << "." << segment << " launched before its capture";
  if (found->second[segment] == nullptr) return;
  DTRAIN_CUDA_CHECK(cudaGraphLaunch(found->second[segment], stream_)) << "step graph " << key << "." << segment;
}

void StepGraphs::clear() {
  runtime::CachingAllocator& allocator = runtime::device_caching_allocator(device_);
  // The pool's blocks are tagged with the stream, so whoever gets them next queues after the
  // launches there; only the graphs themselves wait for their launches to end.
  // The pool is the device's: only the graphs that allocated from it give it back, so that another
  // step's clear (an eager one, or one whose capture was refused) leaves this one's alone.
  if (execs_.empty()) {
    if (pooled_) allocator.release_graph_pool();
    pooled_ = false;
    return;
  }
  runtime::DeviceGuard on(device_);
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_)) << "before dropping the step graphs";
  for (auto& [key, execs] : execs_) {
    for (cudaGraphExec_t exec : execs) {
      if (exec != nullptr) cudaGraphExecDestroy(exec);
    }
  }
  execs_.clear();
  allocator.release_graph_pool();
  pooled_ = false;
}

}  // namespace dtrain::train::cuda
