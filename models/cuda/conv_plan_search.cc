#include "models/cuda/conv_plan_search.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "models/conv_plan_file.h"
#include "runtime/base/env.h"
#include "runtime/base/log.h"
#include "runtime/cuda/cuda_check.h"

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

using Key = std::tuple<int, int, int, int, int, int, int, int, int, int, int, int, bool, int, bool, int>;

Key key_tuple(const ConvPlanKey& k, int device) {
  const Conv2dShape& g = k.geometry;
  return {g.batch,        g.in_channels,
          g.in_h,         g.in_w,
          g.out_channels, g.kernel_h,
          g.kernel_w,     g.stride_h,
          g.stride_w,     g.pad_h,
          g.pad_w,        static_cast<int>(k.numerics),
          k.allow_tf32,   static_cast<int>(k.pass),
          k.accumulate,   device};
}

std::mutex cache_mutex;
size_t plans_measured = 0;  // guarded by cache_mutex
size_t plans_loaded = 0;    // guarded by cache_mutex
std::map<Key, std::shared_ptr<const ConvPlan>>& plan_cache() {
  static auto* cache = new std::map<Key, std::shared_ptr<const ConvPlan>>;  // outlives every static destructor
  return *cache;
}

// The plan file of one device: its path ("" when the cache is off), the first line that says which
// GPU and cuDNN wrote it, and the plans it held when read plus the ones this process measured.
struct PlanFile {
  std::string path, header;
  StoredConvPlans plans;
  bool warned = false;     // a failed write is reported once
  bool announced = false;  // and so is the first measurement
};

std::optional<std::string>& folder_override() {  // set by reset_conv_plan_cache; guarded by cache_mutex
  static auto* folder = new std::optional<std::string>;
  return *folder;
}

std::map<int, PlanFile>& plan_files() {  // by device; guarded by cache_mutex
  static auto* files = new std::map<int, PlanFile>;
  return *files;
}

std::string plan_folder() {
  if (folder_override()) return *folder_override();
  if (const auto folder = runtime::env_string("DTRAIN_PLAN_CACHE")) return *folder == "off" ? "" : *folder;
  if (const auto xdg = runtime::env_string("XDG_CACHE_HOME")) return *xdg + "/dtrain";
  if (const auto home = runtime::env_string("HOME")) return *home + "/.cache/dtrain";
  return "";
}

// The device's plan file, read on first use. Plans depend on the GPU model (name, compute
// capability, SM count) and the cuDNN version: both name the file and fill its first line, so a
// file from another GPU or library is never used (and not overwritten).
PlanFile& plan_file(int device) {
  auto found = plan_files().find(device);
  if (found != plan_files().end()) return found->second;
  PlanFile file;  // filled before it enters the map: a failure here leaves no half-made entry
  const std::string folder = plan_folder();
  if (!folder.empty()) {
    cudaDeviceProp prop{};
    DTRAIN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    const std::string gpu(prop.name);
    std::string safe_gpu;
    for (char c : gpu) safe_gpu += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_';
    const std::string sm = std::to_string(prop.major) + std::to_string(prop.minor);
    const std::string sms = std::to_string(prop.multiProcessorCount);
    const std::string cudnn = std::to_string(cudnnGetVersion());
    file.path = folder + "/conv_plans_" + safe_gpu + "_sm" + sm + "_" + sms + "sms_cudnn" + cudnn + ".txt";
    // "format 1": bump when the numerics filter or the line format changes.
    file.header = "# dtrain convolution plans, format 1: " + gpu + ", sm_" + sm + ", " + sms + " SMs, cuDNN " + cudnn;
    file.plans = read_conv_plan_file(file.path, file.header);
    if (!file.plans.empty()) {
      DTRAIN_LOG0(kInfo) << file.plans.size() << " convolution plans measured earlier on this GPU model are in "
                         << file.path << " (DTRAIN_PLAN_CACHE=off ignores them)";
    }
  }
  return plan_files().emplace(device, std::move(file)).first->second;
}

// The text that names a plan in the file: numerics, pass, beta and shape.
std::string key_text(const ConvPlanKey& k) {
  const Conv2dShape& g = k.geometry;
  std::string text = k.numerics == ConvNumerics::kBf16Nhwc ? "bf16nhwc" : k.allow_tf32 ? "fp32nchw-tf32" : "fp32nchw";
  text += std::string("/") + conv_pass_name(k.pass) + (k.accumulate ? "/beta1/" : "/beta0/");
  for (auto [letter, value] : {std::pair{'n', g.batch},
                               {'c', g.in_channels},
                               {'h', g.in_h},
                               {'w', g.in_w},
                               {'k', g.out_channels},
                               {'r', g.kernel_h},
                               {'s', g.kernel_w},
                               {'u', g.stride_h},
                               {'v', g.stride_w},
                               {'p', g.pad_h},
                               {'q', g.pad_w}}) {
    text += letter + std::to_string(value);
  }
  return text;
}

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

// Whether `plan` runs on `o`: a stored plan that builds may still fail to execute, and must not take
// the job down when measuring would have skipped it. Writes the output operand, as measuring does.
bool runs(cudnnHandle_t handle, const ConvPlan& plan, const ConvOperands& o) {
  cudaStream_t stream = nullptr;
  DTRAIN_CUDNN_CHECK(cudnnGetStream(handle, &stream));
  void* workspace = nullptr;
  if (plan.workspace_bytes > 0 && cudaMalloc(&workspace, static_cast<size_t>(plan.workspace_bytes)) != cudaSuccess) {
    cudaGetLastError();  // clears the failed allocation's error
    return false;
  }
  const BackendDescriptor pack = variant_pack(o, workspace);
  const bool ok = cudnnBackendExecute(handle, plan.plan.get(), pack.get()) == CUDNN_STATUS_SUCCESS &&
                  cudaStreamSynchronize(stream) == cudaSuccess;
  cudaFree(workspace);
  return ok;
}

// Median of kTimedRuns runs after one untimed run, or a negative time when the plan fails to run.
float time_plan(cudnnHandle_t handle, cudaStream_t stream, const ConvPlan& plan, const ConvOperands& o,
                void* workspace) {
  const BackendDescriptor pack = variant_pack(o, workspace);
  if (cudnnBackendExecute(handle, plan.plan.get(), pack.get()) != CUDNN_STATUS_SUCCESS) return -1;
  if (cudaStreamSynchronize(stream) != cudaSuccess) return -1;
  cudaEvent_t start = nullptr, stop = nullptr;
  DTRAIN_CUDA_CHECK(cudaEventCreate(&start));
  DTRAIN_CUDA_CHECK(cudaEventCreate(&stop));
  std::array<float, kTimedRuns> ms{};
  bool ok = true;
  for (float& t : ms) {
    DTRAIN_CUDA_CHECK(cudaEventRecord(start, stream));
    ok = ok && cudnnBackendExecute(handle, plan.plan.get(), pack.get()) == CUDNN_STATUS_SUCCESS;
    DTRAIN_CUDA_CHECK(cudaEventRecord(stop, stream));
    DTRAIN_CUDA_CHECK(cudaEventSynchronize(stop));
    DTRAIN_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ok ? ms[kTimedRuns / 2] : -1;
}

std::shared_ptr<const ConvPlan> measure(cudnnHandle_t caller, const ConvPlanKey& k, const ConvOperands& o, int device) {
  cudaStream_t stream = nullptr;
  DTRAIN_CUDNN_CHECK(cudnnGetStream(caller, &stream));
  const cudnnHandle_t handle = planning_handle(device);
  DTRAIN_CUDNN_CHECK(cudnnSetStream(handle, stream));
  const BackendDescriptor graph = operation_graph(handle, k);
  const size_t limit = workspace_limit();

  std::vector<Candidate> candidates;
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
      candidates.push_back(std::move(c));
      ++taken;
    }
  }
  DTRAIN_CHECK(!candidates.empty()) << "cuDNN offers no deterministic " << conv_pass_name(k.pass)
                                    << " engine for convolution " << k.geometry.describe() << " within "
                                    << (limit >> 20) << " MiB of workspace";

  int64_t most = 0;
  for (const Candidate& c : candidates) most = std::max(most, c.plan.workspace_bytes);
  void* workspace = nullptr;
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream)) << "before measuring convolution plans";  // inputs are ready
  if (most > 0) DTRAIN_CUDA_CHECK(cudaMalloc(&workspace, static_cast<size_t>(most))) << "workspace for measuring";
  int best = -1;
  for (size_t i = 0; i < candidates.size(); ++i) {
    candidates[i].plan.measured_ms = time_plan(handle, stream, candidates[i].plan, o, workspace);
    if (candidates[i].plan.measured_ms < 0) continue;
    if (best < 0 || candidates[i].plan.measured_ms < candidates[static_cast<size_t>(best)].plan.measured_ms)
      best = static_cast<int>(i);
  }
  cudaFree(workspace);
  DTRAIN_CHECK(best >= 0) << "none of the " << candidates.size() << " cuDNN plans for " << conv_pass_name(k.pass)
                          << " of convolution " << k.geometry.describe() << " ran";
  auto chosen = std::make_shared<ConvPlan>(std::move(candidates[static_cast<size_t>(best)].plan));
  chosen->candidates = static_cast<int>(candidates.size());
  return chosen;
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

std::shared_ptr<const ConvPlan> conv_plan(cudnnHandle_t handle, const ConvPlanKey& key,
                                          const ConvOperands& measure_on) {
  int device = 0;
  DTRAIN_CUDA_CHECK(cudaGetDevice(&device));
  const Key k = key_tuple(key, device);
  std::lock_guard<std::mutex> lock(cache_mutex);
  auto found = plan_cache().find(k);
  if (found == plan_cache().end()) {
    PlanFile& file = plan_file(device);
    const std::string text = key_text(key);
    std::shared_ptr<const ConvPlan> plan;
    if (const auto stored = file.plans.find(text); stored != file.plans.end()) {
      std::shared_ptr<const ConvPlan> rebuilt =
          rebuild(planning_handle(device), key, stored->second, workspace_limit());
      if (rebuilt != nullptr && runs(handle, *rebuilt, measure_on)) plan = std::move(rebuilt);
    }
    if (plan != nullptr) {
      ++plans_loaded;
    } else {
      if (!file.announced) {
        file.announced = true;
        DTRAIN_LOG0(kInfo) << "measuring cuDNN plans for the convolutions not measured before on this GPU model "
                           << "(ResNet-50: about a minute, once); "
                           << (file.path.empty()
                                   ? std::string("not kept: no plan folder (DTRAIN_PLAN_CACHE=off, or neither "
                                                 "XDG_CACHE_HOME nor HOME set)")
                                   : "kept in " + file.path + " for later runs");
      }
      plan = measure(handle, key, measure_on, device);
      ++plans_measured;
      if (!file.path.empty()) {
        file.plans[text] = StoredConvPlan{plan->engine, plan->knobs, plan->measured_ms};
        // Other processes may have added plans since this one read the file: keep theirs too.
        StoredConvPlans merged = read_conv_plan_file(file.path, file.header);
        for (const auto& [name, stored] : file.plans) merged[name] = stored;
        std::string error;
        if (!write_conv_plan_file(file.path, file.header, merged, &error) && !file.warned) {
          file.warned = true;
          DTRAIN_LOG(kWarn) << "convolution plans are not kept for later runs: " << error
                            << " (DTRAIN_PLAN_CACHE names another folder, or off)";
        }
      }
    }
    found = plan_cache().emplace(k, std::move(plan)).first;
  }
  // DTRAIN_LOG_LEVEL=debug lists each layer's pass with its measured time (once per layer, cached
  // shapes included): summed over a model, the convolutions' share of a step.
  DTRAIN_LOG(kDebug) << "cuDNN " << conv_pass_name(key.pass) << " " << key.geometry.describe() << ": engine "
                     << found->second->engine << " " << found->second->measured_ms << " ms ("
                     << (found->second->candidates > 0 ? "best of " + std::to_string(found->second->candidates)
                                                       : std::string("from the plan file"))
                     << ")";
  return found->second;
}

void run_conv_plan(cudnnHandle_t handle, const ConvPlan& plan, const ConvOperands& operands, void* workspace) {
  for (const void* p : {operands.x, operands.w, operands.y}) {
    DTRAIN_CHECK(reinterpret_cast<uintptr_t>(p) % kAlignment == 0)
        << "a convolution operand at " << p << " is not " << kAlignment << "-byte aligned, as its plan assumes";
  }
  const BackendDescriptor pack = variant_pack(operands, workspace);
  DTRAIN_CUDNN_CHECK(cudnnBackendExecute(handle, plan.plan.get(), pack.get()));
}

size_t conv_plans_measured() {
  std::lock_guard<std::mutex> lock(cache_mutex);
  return plans_measured;
}

size_t conv_plans_loaded() {
  std::lock_guard<std::mutex> lock(cache_mutex);
  return plans_loaded;
}

std::string conv_plan_file_path() {
  int device = 0;
  DTRAIN_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(cache_mutex);
  return plan_file(device).path;
}

void reset_conv_plan_cache(const std::optional<std::string>& folder) {
  std::lock_guard<std::mutex> lock(cache_mutex);
  plan_cache().clear();
  plan_files().clear();
  folder_override() = folder;
}

}  // namespace dtrain::models::cuda
