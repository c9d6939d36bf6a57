#pragma once
// The cuDNN operation graphs the norm-conv probe asks about, built through the backend (graph) API
// with models/cuda/cudnn_backend.h, and the engines cuDNN's heuristics offer for them.
//
// Patterns (NHWC activations, KRSC filters, fp32 accumulation, 16-byte aligned operands), built from
// three choices (GraphSpec): the convolution, an optional prologue on X, optional statistics of Y:
//   fprop:                X -> conv(W) -> Y                           (the plain convolution of today's step)
//   fprop + stats:        X -> conv(W) -> Y, GenStats(Y) -> sum, sqsum (BN statistics in the epilogue)
//   prologue + fprop:     X -> mul(scale) -> add(bias) -> ReLU -> conv(W) -> Y
//   prologue + fprop + stats: both (cuDNN's ConvBNfprop)
//   wgrad:                X, dY -> wgrad -> dW                        (the step's weight gradient)
//   prologue + wgrad:     X -> mul(scale) -> add(bias) -> ReLU, dY -> wgrad -> dW (cuDNN's ConvBNwgrad)
// scale and bias are [1,C,1,1] of the activations' type (cuDNN's patterns take them so); sum and
// sqsum are fp32 [1,K,1,1]; dW has the activations' type, as the step's bf16 weight gradient; every
// tensor between operations is a virtual fp32 tensor.
// stats_from_accumulator: the convolution writes a virtual fp32 tensor that GenStats reads and an
// identity pointwise op rounds into Y (cuDNN documents GenStats on fp16 and fp32 inputs, not bf16).
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "models/conv2d_shape.h"
#include "models/cuda/cudnn_backend.h"

namespace dtrain::bench::fusion {

enum class Element { kBf16, kFp16 };
// The convolution of a graph: forward (X, W -> Y) or the weight gradient (X, dY -> dW).
enum class Direction { kFprop, kWgrad };

const char* element_name(Element element);

struct GraphSpec {
  models::Conv2dShape shape;
  Element element = Element::kBf16;
  Direction direction = Direction::kFprop;
  bool prologue = false;  // scale, bias and ReLU on X as the convolution loads it
  bool stats = false;     // GenStats of Y (forward only)
  bool stats_from_accumulator = false;
};

// The same convolution without prologue or statistics: what today's step runs beside its own passes.
GraphSpec plain(const GraphSpec& spec);

// Device pointers by role; those a pattern does not use stay null. A wgrad graph reads dY from `y`
// and writes dW into `w` (the tensors of Y's and W's shapes).
struct GraphOperands {
  const void* x = nullptr;
  void* w = nullptr;
  void* y = nullptr;
  const void* scale = nullptr;
  const void* bias = nullptr;
  float* sum = nullptr;
  float* sqsum = nullptr;
};

// Builds and finalizes the graph of `spec`. A descriptor cuDNN refuses throws a CudnnError that
// names the operation and the attribute (or the finalize) it refused.
models::cuda::BackendDescriptor build_graph(cudnnHandle_t handle, const GraphSpec& spec);

struct EngineNotes {
  int64_t index = -1;  // cuDNN's global engine index; -1 when cuDNN does not report it
  bool runtime_compiled = false;
  bool nondeterministic = false;
  bool down_converts = false;
  std::string heuristic;  // "A" or "fallback": the list that offered it
  int position = 0;       // the configuration's place in that list, which tells apart engines of index -1
  std::string refusal;    // why the search or the timing refused it ("" when kept)
};

// One heuristic mode's answer for a graph: the configurations it offered, or the cuDNN status of
// the step that failed (the heuristics' finalize or the reading of its results), so that a mode
// with nothing to offer can be told from one that refused the graph.
struct HeuristicAnswer {
  std::string mode;                             // "A" or "fallback"
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;  // of `failed_at`
  std::string failed_at;                        // "" when the mode answered, else "finalize" or "results"
  int offered = 0;
};

// "mode A: 3 offered; fallback: CUDNN_STATUS_NOT_SUPPORTED at finalize".
std::string describe(const std::vector<HeuristicAnswer>& answers);

struct FusedPlan {
  models::cuda::BackendDescriptor plan;
  EngineNotes engine;
  int64_t workspace_bytes = 0;
};

// What the heuristics offered for a graph and which of those finalized into plans.
struct PlanSearch {
  int offered = 0;                          // engine configurations both heuristic modes returned
  std::vector<HeuristicAnswer> heuristics;  // mode A's, then the fallback's
  std::vector<FusedPlan> plans;             // finalized, within the workspace limit, one per engine
  std::vector<EngineNotes> refused;         // offered but filtered, not finalized or over the workspace limit
};

// Which engines a search keeps, by cuDNN's notes on them.
struct EngineFilter {
  bool runtime_compiled = false;  // compiles at plan time (NVRTC)
  bool nondeterministic = false;  // e.g. atomics across blocks, as a fused statistics epilogue may use
  bool down_converting = false;
};
// The plain convolution's: models/cuda/conv_plan_search.h's numerics filter.
inline constexpr EngineFilter kStepFilter{};

// Asks heuristic mode A, then the fallback list, for configurations of `graph` and finalizes up to
// `max_plans` of those `filter` keeps (the others are listed as refused, with the reason). An
// engine both lists offer is tried once; engines of unreported index are kept apart.
PlanSearch find_plans(cudnnHandle_t handle, const models::cuda::BackendDescriptor& graph, const EngineFilter& filter,
                      size_t workspace_limit, int max_plans);

// The variant pack of `spec`'s real tensors; built once per operand set, so that timing loops
// only queue work.
models::cuda::BackendDescriptor variant_pack(const GraphSpec& spec, const GraphOperands& operands, void* workspace);

// cuDNN's JSON description of a finalized plan (it names the engine and its kernels), or "" when
// this cuDNN does not give one.
std::string plan_description(const FusedPlan& plan);

// Queues `plan` on the handle's stream; the status is cuDNN's.
cudnnStatus_t execute(cudnnHandle_t handle, const FusedPlan& plan, const models::cuda::BackendDescriptor& pack);

}  // namespace dtrain::bench::fusion
