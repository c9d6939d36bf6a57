#include "bench/fusion/norm_conv_graph.h"

#include <algorithm>
#include <array>
#include <deque>
#include <set>
#include <utility>

#include "runtime/base/error.h"
#include "runtime/cuda/cuda_check.h"

// The operation graph and the plan still take the handle in cuDNN 9 (deprecated there in favour of
// the handle given at execution, which the plans here also get).
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

// An attribute and its cuDNN name, so that a refusal names the attribute.
#define NAMED(attribute) attribute, #attribute

namespace dtrain::bench::fusion {
namespace {

using models::cuda::BackendDescriptor;

// Tensor unique ids: the real tensors are the variant pack's; virtual ones only link operations.
enum Uid : int64_t {
  kX = 1,
  kW,
  kY,
  kScale,
  kBias,
  kSum,
  kSqSum,
  kDy,
  kDw,
  kScaled = 101,  // x * scale
  kShifted,       // + bias
  kActivated,     // ReLU: the convolution's input
  kAccumulator,   // the convolution's fp32 output when GenStats reads it
};
constexpr int64_t kAlignment = 16;
constexpr int kHeuristicResults = 64;

cudnnDataType_t data_type(Element element) {
  return element == Element::kBf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
}

// Sets one attribute; a refusal names the attribute and the descriptor it belongs to.
void put(BackendDescriptor& d, const char* owner, cudnnBackendAttributeName_t name, const char* name_text,
         cudnnBackendAttributeType_t type, int64_t count, const void* values) {
  DTRAIN_CUDNN_CHECK(cudnnBackendSetAttribute(d.get(), name, type, count, values))
      << "cuDNN refused attribute " << name_text << " of " << owner;
}

void put_descriptor(BackendDescriptor& d, const char* owner, cudnnBackendAttributeName_t name, const char* name_text,
                    const BackendDescriptor& value) {
  cudnnBackendDescriptor_t raw = value.get();
  put(d, owner, name, name_text, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
}

void finish(BackendDescriptor& d, const char* owner) {
  DTRAIN_CUDNN_CHECK(cudnnBackendFinalize(d.get())) << "cuDNN refused to finalize " << owner;
}

// dims in cuDNN's logical order (N, C, H, W), stored channels-last (NHWC, or KRSC for filters).
BackendDescriptor tensor(const char* owner, int64_t uid, cudnnDataType_t type, std::array<int64_t, 4> d,
                         bool is_virtual) {
  const std::array<int64_t, 4> strides = {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]};
  BackendDescriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  put(t, owner, NAMED(CUDNN_ATTR_TENSOR_DATA_TYPE), CUDNN_TYPE_DATA_TYPE, 1, &type);
  put(t, owner, NAMED(CUDNN_ATTR_TENSOR_DIMENSIONS), CUDNN_TYPE_INT64, 4, d.data());
  put(t, owner, NAMED(CUDNN_ATTR_TENSOR_STRIDES), CUDNN_TYPE_INT64, 4, strides.data());
  put(t, owner, NAMED(CUDNN_ATTR_TENSOR_UNIQUE_ID), CUDNN_TYPE_INT64, 1, &uid);
  put(t, owner, NAMED(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT), CUDNN_TYPE_INT64, 1, &kAlignment);
  put(t, owner, NAMED(CUDNN_ATTR_TENSOR_IS_VIRTUAL), CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  finish(t, owner);
  return t;
}

// y = mode(x[, b]) in fp32.
BackendDescriptor pointwise(const char* owner, cudnnPointwiseMode_t mode, const BackendDescriptor& x,
                            const BackendDescriptor* b, const BackendDescriptor& y) {
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  BackendDescriptor math(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  put(math, owner, NAMED(CUDNN_ATTR_POINTWISE_MODE), CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  put(math, owner, NAMED(CUDNN_ATTR_POINTWISE_MATH_PREC), CUDNN_TYPE_DATA_TYPE, 1, &precision);
  finish(math, owner);
  BackendDescriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  put_descriptor(op, owner, NAMED(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR), math);
  put_descriptor(op, owner, NAMED(CUDNN_ATTR_OPERATION_POINTWISE_XDESC), x);
  if (b != nullptr) put_descriptor(op, owner, NAMED(CUDNN_ATTR_OPERATION_POINTWISE_BDESC), *b);
  put_descriptor(op, owner, NAMED(CUDNN_ATTR_OPERATION_POINTWISE_YDESC), y);
  finish(op, owner);
  return op;
}

BackendDescriptor conv_descriptor(const models::Conv2dShape& g) {
  const char* owner = "the convolution (CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR)";
  const cudnnDataType_t accumulate = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t spatial = 2;
  const std::array<int64_t, 2> dilations = {1, 1}, strides = {g.stride_h, g.stride_w}, pads = {g.pad_h, g.pad_w};
  BackendDescriptor c(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  put(c, owner, NAMED(CUDNN_ATTR_CONVOLUTION_COMP_TYPE), CUDNN_TYPE_DATA_TYPE, 1, &accumulate);
  put(c, owner, NAMED(CUDNN_ATTR_CONVOLUTION_CONV_MODE), CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  put(c, owner, NAMED(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS), CUDNN_TYPE_INT64, 1, &spatial);
  put(c, owner, NAMED(CUDNN_ATTR_CONVOLUTION_DILATIONS), CUDNN_TYPE_INT64, 2, dilations.data());
  put(c, owner, NAMED(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES), CUDNN_TYPE_INT64, 2, strides.data());
  put(c, owner, NAMED(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS), CUDNN_TYPE_INT64, 2, pads.data());
  put(c, owner, NAMED(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS), CUDNN_TYPE_INT64, 2, pads.data());
  finish(c, owner);
  return c;
}

// An attribute and its name, for the refusal message.
struct Attribute {
  cudnnBackendAttributeName_t name;
  const char* text;
};

// A convolution operation's attributes by role: the forward's X, W, Y and the weight gradient's
// X, dW, dY take the same descriptors.
struct ConvOperation {
  cudnnBackendDescriptorType_t type;
  const char* owner;
  Attribute x, w, y, conv, alpha, beta;
};
constexpr ConvOperation kForward{
    CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
    "the convolution forward operation (CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR)",
    {NAMED(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X)},
    {NAMED(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W)},
    {NAMED(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y)},
    {NAMED(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC)},
    {NAMED(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA)},
    {NAMED(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA)}};
constexpr ConvOperation kWeightGradient{
    CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
    "the weight gradient operation (CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR)",
    {NAMED(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X)},
    {NAMED(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW)},
    {NAMED(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY)},
    {NAMED(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC)},
    {NAMED(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA)},
    {NAMED(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA)}};

// w and y are W and Y for the forward operation, dW and dY for the weight gradient.
BackendDescriptor convolution(const ConvOperation& kind, const models::Conv2dShape& g, const BackendDescriptor& x,
                              const BackendDescriptor& w, const BackendDescriptor& y) {
  const BackendDescriptor c = conv_descriptor(g);
  const float alpha = 1.0f, beta = 0.0f;
  BackendDescriptor op(kind.type);
  put_descriptor(op, kind.owner, kind.x.name, kind.x.text, x);
  put_descriptor(op, kind.owner, kind.w.name, kind.w.text, w);
  put_descriptor(op, kind.owner, kind.y.name, kind.y.text, y);
  put_descriptor(op, kind.owner, kind.conv.name, kind.conv.text, c);
  put(op, kind.owner, kind.alpha.name, kind.alpha.text, CUDNN_TYPE_FLOAT, 1, &alpha);
  put(op, kind.owner, kind.beta.name, kind.beta.text, CUDNN_TYPE_FLOAT, 1, &beta);
  finish(op, kind.owner);
  return op;
}

BackendDescriptor gen_stats(const BackendDescriptor& x, const BackendDescriptor& sum, const BackendDescriptor& sqsum) {
  const char* owner = "the statistics operation (CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR)";
  const cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  BackendDescriptor op(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
  put(op, owner, NAMED(CUDNN_ATTR_OPERATION_GENSTATS_MODE), CUDNN_TYPE_GENSTATS_MODE, 1, &mode);
  put(op, owner, NAMED(CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC), CUDNN_TYPE_DATA_TYPE, 1, &precision);
  put_descriptor(op, owner, NAMED(CUDNN_ATTR_OPERATION_GENSTATS_XDESC), x);
  put_descriptor(op, owner, NAMED(CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC), sum);
  put_descriptor(op, owner, NAMED(CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC), sqsum);
  finish(op, owner);
  return op;
}

// Every descriptor of a graph: the operations refer to the tensors, which must outlive finalize. A
// deque, so that the references keep() hands out stay valid as tensors are added.
struct GraphParts {
  std::deque<BackendDescriptor> tensors;
  std::vector<BackendDescriptor> operations;
  const BackendDescriptor& keep(BackendDescriptor t) {
    tensors.push_back(std::move(t));
    return tensors.back();
  }
};

// x -> mul(scale) -> add(bias) -> ReLU; returns the ReLU's output.
const BackendDescriptor& add_prologue(const GraphSpec& spec, const BackendDescriptor& x, GraphParts& parts) {
  const models::Conv2dShape& g = spec.shape;
  const cudnnDataType_t io = data_type(spec.element), f32 = CUDNN_DATA_FLOAT;
  const int64_t c = g.in_channels;
  const std::array<int64_t, 4> x_dims = {g.batch, c, g.in_h, g.in_w};
  const BackendDescriptor& scale = parts.keep(tensor("tensor scale", kScale, io, {1, c, 1, 1}, false));
  const BackendDescriptor& bias = parts.keep(tensor("tensor bias", kBias, io, {1, c, 1, 1}, false));
  const BackendDescriptor& scaled = parts.keep(tensor("virtual tensor x*scale", kScaled, f32, x_dims, true));
  const BackendDescriptor& shifted = parts.keep(tensor("virtual tensor x*scale+bias", kShifted, f32, x_dims, true));
  const BackendDescriptor& active = parts.keep(tensor("virtual tensor ReLU output", kActivated, f32, x_dims, true));
  parts.operations.push_back(pointwise("the scale op (pointwise MUL)", CUDNN_POINTWISE_MUL, x, &scale, scaled));
  parts.operations.push_back(pointwise("the bias op (pointwise ADD)", CUDNN_POINTWISE_ADD, scaled, &bias, shifted));
  parts.operations.push_back(
      pointwise("the ReLU op (pointwise RELU_FWD)", CUDNN_POINTWISE_RELU_FWD, shifted, nullptr, active));
  return active;
}

// The operations of `spec`'s pattern, in data-flow order.
void add_operations(const GraphSpec& spec, GraphParts& parts) {
  DTRAIN_CHECK(!spec.stats || spec.direction == Direction::kFprop) << "GenStats follows a forward convolution only";
  const models::Conv2dShape& g = spec.shape;
  const cudnnDataType_t io = data_type(spec.element), f32 = CUDNN_DATA_FLOAT;
  const int64_t n = g.batch, c = g.in_channels, k = g.out_channels;
  const std::array<int64_t, 4> x_dims = {n, c, g.in_h, g.in_w}, y_dims = {n, k, g.out_h(), g.out_w()};
  const std::array<int64_t, 4> w_dims = {k, c, g.kernel_h, g.kernel_w};
  const BackendDescriptor& x = parts.keep(tensor("tensor X", kX, io, x_dims, false));
  const BackendDescriptor* conv_input = spec.prologue ? &add_prologue(spec, x, parts) : &x;
  if (spec.direction == Direction::kWgrad) {
    const BackendDescriptor& dy = parts.keep(tensor("tensor dY", kDy, io, y_dims, false));
    const BackendDescriptor& dw = parts.keep(tensor("tensor dW", kDw, io, w_dims, false));
    parts.operations.push_back(convolution(kWeightGradient, g, *conv_input, dw, dy));
    return;
  }
  const BackendDescriptor& w = parts.keep(tensor("tensor W", kW, io, w_dims, false));
  const BackendDescriptor& y = parts.keep(tensor("tensor Y", kY, io, y_dims, false));
  const bool via_accumulator = spec.stats && spec.stats_from_accumulator;
  const BackendDescriptor* conv_output = &y;
  if (via_accumulator) conv_output = &parts.keep(tensor("virtual fp32 conv output", kAccumulator, f32, y_dims, true));
  parts.operations.push_back(convolution(kForward, g, *conv_input, w, *conv_output));
  if (via_accumulator) {
    parts.operations.push_back(
        pointwise("the rounding op (pointwise IDENTITY)", CUDNN_POINTWISE_IDENTITY, *conv_output, nullptr, y));
  }
  if (spec.stats) {
    const BackendDescriptor& sum = parts.keep(tensor("tensor sum", kSum, f32, {1, k, 1, 1}, false));
    const BackendDescriptor& sqsum = parts.keep(tensor("tensor sqsum", kSqSum, f32, {1, k, 1, 1}, false));
    parts.operations.push_back(gen_stats(*conv_output, sum, sqsum));
  }
}

// The engine of a configuration and its notes; index -1 when cuDNN does not say.
EngineNotes notes_of(const BackendDescriptor& config, const char* heuristic) {
  EngineNotes notes;
  notes.heuristic = heuristic;
  BackendDescriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t n = 0;
  if (cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &raw) !=
      CUDNN_STATUS_SUCCESS)
    return notes;
  cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &notes.index);
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> numerical{};
  int64_t count = 0;
  if (cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, numerical.size(),
                               &count, numerical.data()) == CUDNN_STATUS_SUCCESS) {
    for (int64_t i = 0; i < std::min<int64_t>(count, numerical.size()); ++i) {
      notes.nondeterministic |= numerical[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
      notes.down_converts |= numerical[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS;
    }
  }
  std::array<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT> behavior{};
  if (cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, behavior.size(), &count,
                               behavior.data()) == CUDNN_STATUS_SUCCESS) {
    for (int64_t i = 0; i < std::min<int64_t>(count, behavior.size()); ++i)
      notes.runtime_compiled |= behavior[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION;
  }
  return notes;
}

// cuDNN's configurations for `graph` under heuristic `mode`, best predicted first, into `configs`;
// the answer says how many, or which step failed with which status.
HeuristicAnswer engine_configs(const BackendDescriptor& graph, cudnnBackendHeurMode_t mode, const char* name,
                               std::vector<BackendDescriptor>& configs) {
  HeuristicAnswer answer;
  answer.mode = name;
  configs.clear();
  BackendDescriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heuristics.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  answer.status = heuristics.try_finalize();
  if (answer.status != CUDNN_STATUS_SUCCESS) {
    answer.failed_at = "finalize";
    return answer;
  }
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int i = 0; i < kHeuristicResults; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(configs.back().get());
  }
  int64_t returned = 0;
  answer.status = cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, kHeuristicResults, &returned, raw.data());
  if (answer.status != CUDNN_STATUS_SUCCESS) {
    answer.failed_at = "results";
    configs.clear();
    return answer;
  }
  configs.resize(static_cast<size_t>(std::clamp<int64_t>(returned, 0, kHeuristicResults)));
  answer.offered = static_cast<int>(configs.size());
  return answer;
}

// Why `filter` refuses an engine, "" when it keeps it.
std::string filtered_out(const EngineNotes& notes, const EngineFilter& filter) {
  if (notes.nondeterministic && !filter.nondeterministic) return "filter: nondeterministic";
  if (notes.down_converts && !filter.down_converting) return "filter: down-converts inputs";
  if (notes.runtime_compiled && !filter.runtime_compiled) return "filter: runtime-compiled";
  return "";
}

// Finalizes `config` into `p` (within `workspace_limit`); returns why not, "" on success.
std::string finalize_plan(cudnnHandle_t handle, const BackendDescriptor& config, size_t workspace_limit, FusedPlan& p) {
  p.plan = BackendDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  p.plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
      .set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
  cudnnStatus_t status = p.plan.try_finalize();
  if (status != CUDNN_STATUS_SUCCESS) return std::string("finalize: ") + cudnnGetErrorString(status);
  int64_t n = 0;
  status = cudnnBackendGetAttribute(p.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                    &p.workspace_bytes);
  if (status != CUDNN_STATUS_SUCCESS) return std::string("workspace size: ") + cudnnGetErrorString(status);
  if (p.workspace_bytes < 0 || static_cast<size_t>(p.workspace_bytes) > workspace_limit)
    return "workspace " + std::to_string(p.workspace_bytes) + " bytes over the limit";
  return "";
}

}  // namespace

const char* element_name(Element element) {
  return element == Element::kBf16 ? "bf16" : "fp16";
}

GraphSpec plain(const GraphSpec& spec) {
  GraphSpec p = spec;
  p.prologue = p.stats = p.stats_from_accumulator = false;
  return p;
}

BackendDescriptor build_graph(cudnnHandle_t handle, const GraphSpec& spec) {
  GraphParts parts;
  add_operations(spec, parts);
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const BackendDescriptor& op : parts.operations) raw.push_back(op.get());
  const char* owner = "the operation graph (CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)";
  BackendDescriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  put(graph, owner, NAMED(CUDNN_ATTR_OPERATIONGRAPH_HANDLE), CUDNN_TYPE_HANDLE, 1, &handle);
  put(graph, owner, NAMED(CUDNN_ATTR_OPERATIONGRAPH_OPS), CUDNN_TYPE_BACKEND_DESCRIPTOR,
      static_cast<int64_t>(raw.size()), raw.data());
  finish(graph, owner);
  return graph;
}

std::string describe(const std::vector<HeuristicAnswer>& answers) {
  std::string text;
  for (const HeuristicAnswer& a : answers) {
    text += (text.empty() ? "" : "; ") + (a.mode == "A" ? std::string("mode A") : a.mode) + ": ";
    text += a.failed_at.empty() ? std::to_string(a.offered) + " offered"
                                : std::string(cudnnGetErrorString(a.status)) + " at " + a.failed_at;
  }
  return text;
}

PlanSearch find_plans(cudnnHandle_t handle, const BackendDescriptor& graph, const EngineFilter& filter,
                      size_t workspace_limit, int max_plans) {
  PlanSearch search;
  std::set<int64_t> seen;  // one plan per engine: the fallback list repeats mode A's engines
  std::vector<BackendDescriptor> configs;
  for (auto [mode, name] : {std::pair{CUDNN_HEUR_MODE_A, "A"}, std::pair{CUDNN_HEUR_MODE_FALLBACK, "fallback"}}) {
    search.heuristics.push_back(engine_configs(graph, mode, name, configs));
    search.offered += search.heuristics.back().offered;
    for (size_t i = 0; i < configs.size(); ++i) {
      EngineNotes notes = notes_of(configs[i], name);
      notes.position = static_cast<int>(i);
      // An engine of unreported index (-1) cannot be matched with another: each stays.
      if (notes.index >= 0 && !seen.insert(notes.index).second) continue;
      if (static_cast<int>(search.plans.size()) >= max_plans) continue;
      FusedPlan p;
      notes.refusal = filtered_out(notes, filter);
      if (notes.refusal.empty()) notes.refusal = finalize_plan(handle, configs[i], workspace_limit, p);
      if (!notes.refusal.empty()) {
        search.refused.push_back(notes);
        continue;
      }
      p.engine = notes;
      search.plans.push_back(std::move(p));
    }
  }
  return search;
}

BackendDescriptor variant_pack(const GraphSpec& spec, const GraphOperands& o, void* workspace) {
  const bool wgrad = spec.direction == Direction::kWgrad;
  std::vector<int64_t> uids = {kX, wgrad ? kDw : kW, wgrad ? kDy : kY};
  std::vector<void*> pointers = {const_cast<void*>(o.x), o.w, o.y};
  if (spec.prologue) {
    uids.insert(uids.end(), {kScale, kBias});
    pointers.insert(pointers.end(), {const_cast<void*>(o.scale), const_cast<void*>(o.bias)});
  }
  if (spec.stats) {
    uids.insert(uids.end(), {kSum, kSqSum});
    pointers.insert(pointers.end(), {o.sum, o.sqsum});
  }
  BackendDescriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()), uids.data())
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(pointers.size()),
           pointers.data())
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack.finalize("a variant pack");
  return pack;
}

std::string plan_description(const FusedPlan& plan) {
  int64_t size = 0;
  if (cudnnBackendGetAttribute(plan.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0,
                               &size, nullptr) != CUDNN_STATUS_SUCCESS ||
      size <= 0)
    return "";
  std::string text(static_cast<size_t>(size), '\0');
  if (cudnnBackendGetAttribute(plan.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, size,
                               &size, text.data()) != CUDNN_STATUS_SUCCESS)
    return "";
  text.resize(std::min(text.size(), static_cast<size_t>(std::max<int64_t>(size, 0))));
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

cudnnStatus_t execute(cudnnHandle_t handle, const FusedPlan& plan, const BackendDescriptor& pack) {
  return cudnnBackendExecute(handle, plan.plan.get(), pack.get());
}

}  // namespace dtrain::bench::fusion
