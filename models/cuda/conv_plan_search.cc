#include "models/cuda/conv_plan_search.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <vector>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/stream.h"

// The operation graph and the plan still take the handle in cuDNN 9 (deprecated there in favour of
// the handle given at execution, which the plan we run also gets).
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace dtrain::models::cuda {
namespace {

constexpr int64_t kUidX = 1, kUidW = 2, kUidY = 3;
constexpr int64_t kAlignment = 16;  // bytes; every operand comes from the caching allocator or an aligned slot
constexpr int kMaxHeuristicResults = 64;
constexpr int kMeasuredFromModeA = 12;    // cuDNN's best-predicted configurations measured
constexpr int kMeasuredFromFallback = 4;  // plus the first of its fallback list
constexpr int kTimedRuns = 3;

// Plans are built on a handle of the cache's own, one per device, that lives as long as the
// process: a cached plan must not refer to a caller's handle that a finished layer destroyed.
cudnnHandle_t planning_handle(int device) {
  static auto* handles = new std::map<int, cudnnHandle_t>;
  auto found = handles->find(device);
  if (found != handles->end()) return found->second;
  cudnnHandle_t handle = nullptr;
  DTRAIN_CUDNN_CHECK(cudnnCreate(&handle)) << "creating the cuDNN handle that plans convolutions on GPU " << device;
  handles->emplace(device, handle);
  return handle;
}

// dims in cuDNN's logical order (N, C, H, W), strides of NHWC or NCHW storage.
BackendDescriptor tensor(int64_t uid, cudnnDataType_t type, std::array<int64_t, 4> d, bool channels_last) {
  const std::vector<int64_t> strides = channels_last ? std::vector<int64_t>{d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]}
                                                     : std::vector<int64_t>{d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
  BackendDescriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type)
      .set_int64(CUDNN_ATTR_TENSOR_DIMENSIONS, {d[0], d[1], d[2], d[3]})
      .set_int64(CUDNN_ATTR_TENSOR_STRIDES, strides)
      .set_int64(CUDNN_ATTR_TENSOR_UNIQUE_ID, {uid})
      .set_int64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, {kAlignment});
  t.finalize("a convolution tensor descriptor");
  return t;
}

BackendDescriptor convolution(const Conv2dShape& g) {
  const cudnnDataType_t accumulate = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;  // every framework's "convolution"
  BackendDescriptor c(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  c.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &accumulate)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
      .set_int64(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, {2})
      .set_int64(CUDNN_ATTR_CONVOLUTION_DILATIONS, {1, 1})
      .set_int64(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, {g.stride_h, g.stride_w})
      .set_int64(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, {g.pad_h, g.pad_w})
      .set_int64(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, {g.pad_h, g.pad_w});
  c.finalize("a convolution descriptor");
  return c;
}

// A pass's operation type and the attribute names of its operands (x or dx, w or dw, y or dy).
struct PassAttributes {
  cudnnBackendDescriptorType_t operation;
  cudnnBackendAttributeName_t x, w, y, convolution, alpha, beta;
};

PassAttributes attributes_of(ConvPass pass) {
  switch (pass) {
    case ConvPass::kForward:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
    case ConvPass::kBackwardData:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
    case ConvPass::kBackwardFilter:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
  }
  DTRAIN_FAIL() << "unknown convolution pass";
}

// The one-operation graph of a pass.
BackendDescriptor operation_graph(cudnnHandle_t handle, const ConvPlanKey& k) {
  const Conv2dShape& g = k.geometry;
  const bool bf16 = k.numerics == ConvNumerics::kBf16Nhwc;
  const cudnnDataType_t type = bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  const BackendDescriptor x = tensor(kUidX, type, {g.batch, g.in_channels, g.in_h, g.in_w}, bf16);
  const BackendDescriptor w = tensor(kUidW, type, {g.out_channels, g.in_channels, g.kernel_h, g.kernel_w}, bf16);
  const BackendDescriptor y = tensor(kUidY, type, {g.batch, g.out_channels, g.out_h(), g.out_w()}, bf16);
  const BackendDescriptor conv = convolution(g);
  const float alpha = 1.0f, beta = k.accumulate ? 1.0f : 0.0f;
  const PassAttributes a = attributes_of(k.pass);
  BackendDescriptor op(a.operation);
  op.set_descriptor(a.x, x)
      .set_descriptor(a.w, w)
      .set_descriptor(a.y, y)
      .set_descriptor(a.convolution, conv)
      .set(a.alpha, CUDNN_TYPE_FLOAT, 1, &alpha)
      .set(a.beta, CUDNN_TYPE_FLOAT, 1, &beta);
  op.finalize("a convolution operation");
  BackendDescriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
      .set_descriptors(CUDNN_ATTR_OPERATIONGRAPH_OPS, {op.get()});
  graph.finalize("a convolution operation graph");
  return graph;
}

// cuDNN's engine configurations for `graph` under heuristic `mode`, best predicted first.
std::vector<BackendDescriptor> engine_configs(const BackendDescriptor& graph, cudnnBackendHeurMode_t mode) {
  BackendDescriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heuristics.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (heuristics.try_finalize() != CUDNN_STATUS_SUCCESS) return {};  // this mode has nothing for the graph
  std::vector<BackendDescriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int i = 0; i < kMaxHeuristicResults; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(configs.back().get());
  }
  int64_t returned = 0;
  DTRAIN_CUDNN_CHECK(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, kMaxHeuristicResults, &returned,
                                              raw.data()))
      << "reading cuDNN's engine heuristics";
  configs.resize(static_cast<size_t>(std::clamp<int64_t>(returned, 0, kMaxHeuristicResults)));
  return configs;
}

struct EngineFacts {
  int64_t index = -1;
  bool acceptable = false;
};

// Whether a configuration's engine passes the numerics filter in the header.
EngineFacts facts_of(const BackendDescriptor& config, const ConvPlanKey& k) {
  BackendDescriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t n = 0;
  if (cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &raw) !=
      CUDNN_STATUS_SUCCESS)
    return {};
  EngineFacts facts;
  cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &facts.index);
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> numerical{};
  int64_t numerical_count = 0;
  if (cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, numerical.size(),
                               &numerical_count, numerical.data()) != CUDNN_STATUS_SUCCESS)
    return facts;
  std::array<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT> behavior{};
  int64_t behavior_count = 0;
  if (cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, behavior.size(),
                               &behavior_count, behavior.data()) != CUDNN_STATUS_SUCCESS)
    return facts;
  const bool fp32_exact = k.numerics == ConvNumerics::kFp32Nchw && !k.allow_tf32;
  for (int64_t i = 0; i < std::min<int64_t>(numerical_count, numerical.size()); ++i) {
    const cudnnBackendNumericalNote_t note = numerical[static_cast<size_t>(i)];
    if (note == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS || note == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) return facts;
    if (fp32_exact && note == CUDNN_NUMERICAL_NOTE_TENSOR_CORE) return facts;
  }
  for (int64_t i = 0; i < std::min<int64_t>(behavior_count, behavior.size()); ++i) {
    if (behavior[static_cast<size_t>(i)] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) return facts;
  }
  facts.acceptable = true;
  return facts;
}

size_t workspace_limit() {
  size_t free_bytes = 0, total_bytes = 0;
  DTRAIN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  // A quarter of the free memory, at most 1 GiB: room stays for the model's activations.
  return std::min<size_t>(free_bytes / 4, size_t{1} << 30);
}

BackendDescriptor variant_pack(const ConvOperands& o, void* workspace) {
  int64_t uids[3] = {kUidX, kUidW, kUidY};
  void* pointers[3] = {const_cast<void*>(o.x), const_cast<void*>(o.w), const_cast<void*>(o.y)};
  BackendDescriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids)
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, pointers)
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack.finalize("a convolution variant pack");
  return pack;
}

struct Candidate {
  ConvPlan plan;
  bool usable = false;
};

// A finalized plan for `config`, or an unusable candidate when the configuration does not take
// this graph or wants more workspace than `limit`.
Candidate plan_for(cudnnHandle_t handle, const BackendDescriptor& config, int64_t engine, size_t limit) {
  Candidate c;
  c.plan.plan = BackendDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  c.plan.plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
      .set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
  if (c.plan.plan.try_finalize() != CUDNN_STATUS_SUCCESS) return c;
  int64_t n = 0;
  if (cudnnBackendGetAttribute(c.plan.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                               &c.plan.workspace_bytes) != CUDNN_STATUS_SUCCESS)
    return c;
  c.plan.engine = engine;
  c.usable = c.plan.workspace_bytes >= 0 && static_cast<size_t>(c.plan.workspace_bytes) <= limit;
  return c;
}

// The knob choices of a configuration (cuDNN's heuristics return them fully specified).
std::vector<std::pair<int64_t, int64_t>> knob_choices(const BackendDescriptor& config) {
  std::vector<BackendDescriptor> choices;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int i = 0; i < CUDNN_KNOB_TYPE_COUNTS; ++i) {
    choices.emplace_back(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    raw.push_back(choices.back().get());
  }
  int64_t count = 0;
  DTRAIN_CUDNN_CHECK(cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(raw.size()), &count,
                                              raw.data()))
      << "reading an engine configuration's knob choices";
  std::vector<std::pair<int64_t, int64_t>> knobs;
  for (int64_t i = 0; i < std::min<int64_t>(count, static_cast<int64_t>(raw.size())); ++i) {
    cudnnBackendKnobType_t type{};
    int64_t value = 0, n = 0;
    DTRAIN_CUDNN_CHECK(cudnnBackendGetAttribute(raw[static_cast<size_t>(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                                                CUDNN_TYPE_KNOB_TYPE, 1, &n, &type))
        << "reading a knob choice's type";
    DTRAIN_CUDNN_CHECK(cudnnBackendGetAttribute(raw[static_cast<size_t>(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE,
                                                CUDNN_TYPE_INT64, 1, &n, &value))
        << "reading a knob choice's value";
    knobs.emplace_back(static_cast<int64_t>(type), value);
  }
  return knobs;
}

// The plan a file stored for `k`, built from its engine and knobs without measuring; nullptr when
// this cuDNN does not build it any more, the numerics filter refuses it, or it wants more workspace
// than `limit` (the caller measures then).
std::shared_ptr<ConvPlan> rebuild(cudnnHandle_t handle, const ConvPlanKey& k, const StoredConvPlan& stored,
                                  size_t limit) {
  try {
    const BackendDescriptor graph = operation_graph(handle, k);
    BackendDescriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    engine.set_descriptor(CUDNN_ATTR_ENGINE_OPERATION_GRAPH, graph)
        .set_int64(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, {stored.engine});
    if (engine.try_finalize() != CUDNN_STATUS_SUCCESS) return nullptr;
    std::vector<BackendDescriptor> choices;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (const auto& [type, value] : stored.knobs) {
      if (type < 0 || type >= CUDNN_KNOB_TYPE_COUNTS) return nullptr;  // not a knob of this cuDNN
      const auto knob = static_cast<cudnnBackendKnobType_t>(type);
      choices.emplace_back(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
      choices.back()
          .set(CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &knob)
          .set(CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &value);
      if (choices.back().try_finalize() != CUDNN_STATUS_SUCCESS) return nullptr;
      raw.push_back(choices.back().get());
    }
    BackendDescriptor config(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    config.set_descriptor(CUDNN_ATTR_ENGINECFG_ENGINE, engine);
    if (!raw.empty()) config.set_descriptors(CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, raw);
    if (config.try_finalize() != CUDNN_STATUS_SUCCESS) return nullptr;
    const EngineFacts facts = facts_of(config, k);
    if (!facts.acceptable || facts.index != stored.engine) return nullptr;
    Candidate c = plan_for(handle, config, facts.index, limit);
    if (!c.usable) return nullptr;
    c.plan.knobs = stored.knobs;
    c.plan.measured_ms = stored.measured_ms;
    return std::make_shared<ConvPlan>(std::move(c.plan));
  } catch (const std::exception&) {  // cuDNN refused an attribute: a stale entry, measured again
    return nullptr;
  }
}
// Device memory straight from cudaMalloc, freed when it goes. Not a runtime::Buffer: the caching
// allocator would keep a measuring workspace (up to 1 GiB, of a size no layer asks for again)
// after the search, and the free memory that later searches take their workspace limit from
// would shrink with every shape measured.
struct FreeDeviceMemory {
  void operator()(void* p) const noexcept { cudaFree(p); }
};
using DeviceMemory = std::unique_ptr<void, FreeDeviceMemory>;

// `bytes` (none for 0) and the allocation's status.
DeviceMemory allocate(int64_t bytes, cudaError_t& status) {
  void* p = nullptr;
  status = bytes > 0 ? cudaMalloc(&p, static_cast<size_t>(bytes)) : cudaSuccess;
  return DeviceMemory(p);
}

// Median of kTimedRuns runs after one untimed run, or a negative time when the plan fails to run.
float time_plan(cudnnHandle_t handle, cudaStream_t stream, const ConvPlan& plan, const ConvOperands& o,
                void* workspace) {
  const BackendDescriptor pack = variant_pack(o, workspace);
  if (cudnnBackendExecute(handle, plan.plan.get(), pack.get()) != CUDNN_STATUS_SUCCESS) return -1;
  if (cudaStreamSynchronize(stream) != cudaSuccess) return -1;
  runtime::CudaEvent start(/*timing=*/true), stop(/*timing=*/true);
  std::array<float, kTimedRuns> ms{};
  bool ok = true;
  for (float& t : ms) {
    start.record(stream);
    ok = ok && cudnnBackendExecute(handle, plan.plan.get(), pack.get()) == CUDNN_STATUS_SUCCESS;
    stop.record(stream);
    stop.synchronize();
    t = stop.elapsed_ms_since(start);
  }
  std::sort(ms.begin(), ms.end());
  return ok ? ms[kTimedRuns / 2] : -1;
}

// cuDNN's candidates for `k` that pass the numerics filter and fit `limit`: the first
// kMeasuredFromModeA of heuristic mode A, then the first kMeasuredFromFallback of its fallback list.
std::vector<Candidate> candidates(cudnnHandle_t handle, const ConvPlanKey& k, const BackendDescriptor& graph,
                                  size_t limit) {
  std::vector<Candidate> found;
  for (auto [mode, wanted] :
       {std::pair{CUDNN_HEUR_MODE_A, kMeasuredFromModeA}, std::pair{CUDNN_HEUR_MODE_FALLBACK, kMeasuredFromFallback}}) {
    int taken = 0;
    for (const BackendDescriptor& config : engine_configs(graph, mode)) {
      if (taken == wanted) break;
      const EngineFacts facts = facts_of(config, k);
      if (!facts.acceptable) continue;
      Candidate c = plan_for(handle, config, facts.index, limit);
      if (!c.usable) continue;
      c.plan.knobs = knob_choices(config);
      found.push_back(std::move(c));
      ++taken;
    }
  }
  DTRAIN_CHECK(!found.empty()) << "cuDNN offers no deterministic " << conv_pass_name(k.pass)
                               << " engine for convolution " << k.geometry.describe() << " within " << (limit >> 20)
                               << " MiB of workspace";
  return found;
}

}  // namespace

const char* conv_pass_name(ConvPass pass) {
  switch (pass) {
    case ConvPass::kForward: return "forward";
    case ConvPass::kBackwardData: return "backward-data";
    case ConvPass::kBackwardFilter: return "backward-filter";
  }
  return "?";
}

std::shared_ptr<const ConvPlan> measure_conv_plan(cudnnHandle_t caller, const ConvPlanKey& k, const ConvOperands& o,
                                                  int device) {
  cudaStream_t stream = nullptr;
  DTRAIN_CUDNN_CHECK(cudnnGetStream(caller, &stream));
  const cudnnHandle_t handle = planning_handle(device);
  DTRAIN_CUDNN_CHECK(cudnnSetStream(handle, stream));
  const BackendDescriptor graph = operation_graph(handle, k);
  std::vector<Candidate> found = candidates(handle, k, graph, workspace_limit());

  int64_t most = 0;
  for (const Candidate& c : found) most = std::max(most, c.plan.workspace_bytes);
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream)) << "before measuring convolution plans";  // inputs are ready
  cudaError_t status = cudaSuccess;
  const DeviceMemory workspace = allocate(most, status);
  DTRAIN_CUDA_CHECK(status) << "workspace for measuring";
  int best = -1;
  for (size_t i = 0; i < found.size(); ++i) {
    found[i].plan.measured_ms = time_plan(handle, stream, found[i].plan, o, workspace.get());
    if (found[i].plan.measured_ms < 0) continue;
    if (best < 0 || found[i].plan.measured_ms < found[static_cast<size_t>(best)].plan.measured_ms)
      best = static_cast<int>(i);
  }
  DTRAIN_CHECK(best >= 0) << "none of the " << found.size() << " cuDNN plans for " << conv_pass_name(k.pass)
                          << " of convolution " << k.geometry.describe() << " ran";
  auto chosen = std::make_shared<ConvPlan>(std::move(found[static_cast<size_t>(best)].plan));
  chosen->candidates = static_cast<int>(found.size());
  return chosen;
}

std::shared_ptr<const ConvPlan> rebuild_conv_plan(const ConvPlanKey& key, const StoredConvPlan& stored, int device) {
  const size_t limit = workspace_limit();  // before the planning handle, whose creation takes device memory
  return rebuild(planning_handle(device), key, stored, limit);
}

bool conv_plan_runs(cudnnHandle_t handle, const ConvPlan& plan, const ConvOperands& o) {
  cudaStream_t stream = nullptr;
  DTRAIN_CUDNN_CHECK(cudnnGetStream(handle, &stream));
  cudaError_t status = cudaSuccess;
  const DeviceMemory workspace = allocate(plan.workspace_bytes, status);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clears the failed allocation's error
    return false;
  }
  const BackendDescriptor pack = variant_pack(o, workspace.get());
  return cudnnBackendExecute(handle, plan.plan.get(), pack.get()) == CUDNN_STATUS_SUCCESS &&
         cudaStreamSynchronize(stream) == cudaSuccess;
}

void run_conv_plan(cudnnHandle_t handle, const ConvPlan& plan, const ConvOperands& operands, void* workspace) {
  for (const void* p : {operands.x, operands.w, operands.y}) {
    DTRAIN_CHECK(reinterpret_cast<uintptr_t>(p) % kAlignment == 0)
        << "a convolution operand at " << p << " is not " << kAlignment << "-byte aligned, as its plan assumes";
  }
  const BackendDescriptor pack = variant_pack(operands, workspace);
  DTRAIN_CUDNN_CHECK(cudnnBackendExecute(handle, plan.plan.get(), pack.get()));
}

}  // namespace dtrain::models::cuda
