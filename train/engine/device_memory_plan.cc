#include "train/engine/device_memory_plan.h"

#include <cstdio>
#include <map>
#include <optional>
#include <sstream>

#include "runtime/base/error.h"
#include "runtime/memory/caching_allocator.h"

namespace dtrain::train {
namespace {

// The categories, in the order the table lists them.
enum Category {
  kParameters,
  kBf16Weights,
  kGradients,
  kMomentum,
  kGradientSum,
  kBatchNormState,
  kInputs,
  kConvOutputs,
  kNormOutputs,
  kReluMasks,
  kPoolIndices,
  kHead,
  kCategoryCount
};
constexpr const char* kNames[kCategoryCount] = {
    "parameters (fp32 master)",
    "weights (bf16 copy)",
    "gradients (fp32)",
    "momentum (fp32)",
    "gradient sum (fp32, accumulation)",
    "batch norm running + saved stats",
    "inputs (uint8 slots, labels, normalized)",
    "saved: convolution outputs",
    "saved: norm/ReLU outputs (max pool's too)",
    "saved: ReLU masks (1 bit)",
    "saved: max pool indices",
    "saved: head (pooled, logits) and loss gradient",
};
constexpr int kFirstSaved = kConvOutputs;

// The live bytes of a replayed step: each allocation rounded as the caching allocator rounds it,
// the sum in use and its peak.
class Replay {
 public:
  int alloc(size_t bytes, int category = -1) {
    const size_t size = runtime::CachingAllocator::round_size(bytes);
    live_[next_] = {size, category};
    if (category >= 0) categories_[category] += size;
    current_ += size;
    if (current_ > peak_) peak_ = current_, peak_at_ = where_;
    return next_++;
  }
  void free(int id) {
    if (id < 0) return;
    const auto it = live_.find(id);
    DTRAIN_CHECK(it != live_.end()) << "memory plan: allocation " << id << " freed twice";
    current_ -= it->second.first;
    if (it->second.second >= 0) categories_[it->second.second] -= it->second.first;
    live_.erase(it);
  }
  void at(std::string where) { where_ = std::move(where); }
  size_t current() const { return current_; }
  size_t peak() const { return peak_; }
  const std::string& peak_at() const { return peak_at_; }
  size_t category(int c) const { return categories_[c]; }

 private:
  std::map<int, std::pair<size_t, int>> live_;
  size_t categories_[kCategoryCount] = {};
  size_t current_ = 0, peak_ = 0;
  int next_ = 0;
  std::string where_ = "forward", peak_at_;
};

struct Activation {
  int64_t channels = 0, height = 0, width = 0;
};

// One conv -> norm-act stage as the GPU ResNet runs it: what its forward keeps.
struct Stage {
  const models::ConvNormSpec* spec = nullptr;
  Activation in, out;
  int conv_out = -1, norm_out = -1, mask = -1;
};

class Planner {
 public:
  explicit Planner(const DeviceMemoryPlanOptions& o) : o_(o), element_(o.bf16 ? 2 : 4) {}

  int64_t numel(const Activation& a) const { return int64_t{o_.batch} * a.channels * a.height * a.width; }
  size_t bytes(const Activation& a) const { return static_cast<size_t>(numel(a)) * element_; }

  Stage forward(const models::ConvNormSpec& s, const Activation& in) {
    Stage st{&s,
             in,
             {s.out_channels, (in.height + 2 * s.pad - s.kernel) / s.stride + 1,
              (in.width + 2 * s.pad - s.kernel) / s.stride + 1}};
    st.conv_out = replay.alloc(bytes(st.out), kConvOutputs);
    pytorch[kConvOutputs] += bytes(st.out);
    if (!s.norm.empty() || s.relu) {
      st.norm_out = replay.alloc(bytes(st.out), kNormOutputs);
      if (s.relu) pytorch[kNormOutputs] += bytes(st.out);  // a shortcut's BN output is not kept
    }
    if (s.relu && !s.norm.empty())
      st.mask = replay.alloc(static_cast<size_t>((numel(st.out) + 31) / 32 * 4), kReluMasks);
    return st;
  }
  void release(const Stage& st) {
    replay.free(st.conv_out);
    replay.free(st.norm_out);
    replay.free(st.mask);
  }
  // `ours` bytes allocated, `theirs` in PyTorch's column.
  void each(int category, size_t ours, size_t theirs) {
    replay.alloc(ours, category);
    pytorch[category] += theirs;
  }
  // The transient bf16 weight gradient of a convolution's backward.
  void weight_gradient(const Stage& st) {
    if (!o_.bf16) return;
    const models::ConvNormSpec& s = *st.spec;
    replay.free(replay.alloc(size_t{2} * s.in_channels * s.out_channels * s.kernel * s.kernel));
  }

  const DeviceMemoryPlanOptions& o_;
  size_t element_;
  Replay replay;
  size_t pytorch[kCategoryCount] = {};
};

struct BlockStages {
  const models::ResidualBlockSpec* spec;
  std::vector<Stage> branch;
  std::optional<Stage> shortcut;
};

// The block's backward (gpu_resnet.cc, Block::backward), then the release of its outputs; returns
// the input gradient, which the caller frees once the block below has used it.
int block_backward(Planner& p, const BlockStages& b) {
  Replay& r = p.replay;
  r.at("backward of " + b.spec->name);
  const Activation in = b.branch.front().in, out = b.branch.back().out;
  const int dx = r.alloc(p.bytes(in));
  const int d_skip = b.shortcut ? r.alloc(p.bytes(out)) : -1;
  int d = r.alloc(p.bytes(out));
  for (size_t i = b.branch.size() - 1; i > 0; --i) {
    p.weight_gradient(b.branch[i]);
    const int conv_dx = r.alloc(p.bytes(b.branch[i].in));
    r.free(d);
    d = r.alloc(p.bytes(b.branch[i - 1].out));
    r.free(conv_dx);
  }
  p.weight_gradient(b.branch[0]);
  if (b.shortcut) {
    const int shortcut_dx = r.alloc(p.bytes(out));
    p.weight_gradient(*b.shortcut);
    r.free(shortcut_dx);
    r.free(d_skip);
  }
  r.free(d);
  for (const Stage& st : b.branch) p.release(st);
  if (b.shortcut) p.release(*b.shortcut);
  return dx;
}

// Held from the step's construction on: DeviceParameters' fp32 master, gradients, state and bf16
// copy, GpuTrainStep's momentum, input slots and normalized input, the classifier's input gradient
// (GpuLinear keeps it) and the loss gradient.
void persistent(Planner& p, const models::ResNetPlan& plan) {
  const DeviceMemoryPlanOptions& o = p.o_;
  models::ParameterSet params;
  models::declare_parameters(plan, params);
  // dtrain's flat buffers hold the alignment gaps between slots (parameter_set.h); PyTorch's
  // tensors hold the values only.
  const size_t n = static_cast<size_t>(params.flat_size()), state = static_cast<size_t>(params.state_count());
  size_t values = 0, state_values = 0;
  for (const models::ParamSlot& slot : params.slots()) values += static_cast<size_t>(slot.numel);
  for (const models::ParamSlot& slot : params.state_slots()) state_values += static_cast<size_t>(slot.numel);
  p.each(kParameters, n * 4, values * 4);
  p.each(kGradients, n * 4, values * 4);
  p.each(kMomentum, n * 4, values * 4);
  if (o.bf16) p.each(kBf16Weights, n * 2, values * 2);  // PyTorch: autocast's cache of bf16 weights
  if (o.accumulation_steps > 1) p.each(kGradientSum, n * 4, values * 4);
  p.each(kBatchNormState, state * 4, state_values * 4);
  const int channels = plan.stem.in_channels;
  for (int s = 0; s < o.input_slots; ++s) {
    p.replay.alloc(size_t{1} * o.batch * o.height * o.width * channels, kInputs);
    p.replay.alloc(size_t{4} * o.batch, kInputs);
  }
  p.each(kInputs, p.bytes({channels, o.height, o.width}), p.bytes({channels, o.height, o.width}));
  p.replay.alloc(p.bytes({plan.features, 1, 1}), kHead);
  p.replay.alloc(p.bytes({plan.num_classes, 1, 1}), kHead);
}

struct Forward {
  Stage stem;
  int pool_out = -1, pool_indices = -1;
  std::vector<BlockStages> blocks;
  Activation features;  // the last block's output
};

// A stage's forward and, with batch norm, its saved mean and inverse std (allocated once).
Stage stage_forward(Planner& p, const models::ConvNormSpec& s, const Activation& in) {
  Stage st = p.forward(s, in);
  if (!s.norm.empty()) {
    for (int k = 0; k < 2; ++k) p.each(kBatchNormState, size_t{4} * s.out_channels, size_t{4} * s.out_channels);
  }
  return st;
}

// gpu_resnet.cc's forward.
Forward forward(Planner& p, const models::ResNetPlan& plan) {
  Replay& r = p.replay;
  Forward f;
  f.stem = stage_forward(p, plan.stem, {plan.stem.in_channels, p.o_.height, p.o_.width});
  Activation h = f.stem.out;
  if (plan.stem_max_pool) {
    h = {h.channels, (h.height + 2 - 3) / 2 + 1, (h.width + 2 - 3) / 2 + 1};
    f.pool_out = r.alloc(p.bytes(h), kNormOutputs);
    f.pool_indices = r.alloc(static_cast<size_t>(p.numel(h)) * 4, kPoolIndices);
    p.pytorch[kNormOutputs] += p.bytes(h);
    p.pytorch[kPoolIndices] += static_cast<size_t>(p.numel(h)) * 8;  // int64
  }
  for (const models::ResidualBlockSpec& spec : plan.blocks) {
    BlockStages b{&spec, {}, std::nullopt};
    Activation x = h;
    for (size_t i = 0; i + 1 < spec.branch.size(); ++i) {
      b.branch.push_back(stage_forward(p, spec.branch[i], x));
      x = b.branch.back().out;
    }
    if (spec.shortcut) b.shortcut = stage_forward(p, *spec.shortcut, h);
    b.branch.push_back(stage_forward(p, spec.branch.back(), x));
    if (b.shortcut && !spec.shortcut->norm.empty()) {  // dead once added
      r.free(b.shortcut->norm_out);
      b.shortcut->norm_out = -1;
    }
    h = b.branch.back().out;
    f.blocks.push_back(std::move(b));
  }
  p.each(kHead, p.bytes({plan.features, 1, 1}), p.bytes({plan.features, 1, 1}));        // the average pool's output
  p.each(kHead, p.bytes({plan.num_classes, 1, 1}), p.bytes({plan.num_classes, 1, 1}));  // the logits
  f.features = h;
  return f;
}

// The loss's row scratch, then gpu_resnet.cc's backward.
void backward(Planner& p, const models::ResNetPlan& plan, const Forward& f) {
  Replay& r = p.replay;
  r.at("the loss");
  r.free(r.alloc(size_t{8} * p.o_.batch));
  r.at("backward of the head");
  int previous = r.alloc(p.bytes(f.features));  // the average pool's input gradient
  for (auto it = f.blocks.rbegin(); it != f.blocks.rend(); ++it) {
    const int dx = block_backward(p, *it);
    r.free(previous);
    previous = dx;
  }
  r.at("backward of the stem");
  if (plan.stem_max_pool) {
    const int pool_dx = r.alloc(p.bytes(f.stem.out));
    r.free(previous);
    previous = pool_dx;
  }
  const int norm_dx = r.alloc(p.bytes(f.stem.out));
  p.weight_gradient(f.stem);
  r.free(previous);
  r.free(norm_dx);
  r.free(f.pool_out);
  r.free(f.pool_indices);
  p.release(f.stem);
}

}  // namespace

DeviceMemoryPlan device_memory_plan(const models::ResNetPlan& plan, const DeviceMemoryPlanOptions& o) {
  DTRAIN_CHECK(o.batch > 0 && o.height > 0 && o.width > 0)
      << "memory plan: batch " << o.batch << ", image " << o.height << "x" << o.width << " must be positive";
  Planner p(o);
  persistent(p, plan);
  const Forward f = forward(p, plan);
  DeviceMemoryPlan out;
  out.forward_end = p.replay.current();
  for (int c = 0; c < kCategoryCount; ++c) {
    MemoryCategory m{kNames[c], p.replay.category(c), p.pytorch[c]};
    if (m.dtrain == 0 && m.pytorch == 0) continue;
    (c < kFirstSaved ? out.persistent : out.saved).push_back(m);
    out.pytorch_total += m.pytorch;
  }
  backward(p, plan, f);
  out.predicted_peak = p.replay.peak();
  out.peak_at = p.replay.peak_at();
  return out;
}

namespace {

double gb(size_t bytes) {
  return static_cast<double>(bytes) / 1e9;
}

size_t sum(const std::vector<MemoryCategory>& v, size_t MemoryCategory::*field) {
  size_t total = 0;
  for (const MemoryCategory& m : v) total += m.*field;
  return total;
}

}  // namespace

std::string memory_plan_line(const DeviceMemoryPlan& plan) {
  std::ostringstream line;
  line.precision(3);
  line << "device memory plan:";
  for (const MemoryCategory& m : plan.persistent) line << " " << m.name << " " << gb(m.dtrain) << ",";
  line << " saved for backward " << gb(sum(plan.saved, &MemoryCategory::dtrain)) << " (";
  for (size_t i = 0; i < plan.saved.size(); ++i)
    line << (i ? ", " : "") << plan.saved[i].name.substr(7) << " " << gb(plan.saved[i].dtrain);
  line << "); predicted peak " << gb(plan.predicted_peak) << " GB in use (" << plan.peak_at
       << ") plus cuDNN workspaces; PyTorch's autograd keeps " << gb(plan.pytorch_total) << " GB";
  return line.str();
}

std::string memory_plan_table(const DeviceMemoryPlan& plan) {
  std::ostringstream table;
  char row[160];
  std::snprintf(row, sizeof(row), "%-48s %10s %10s\n", "device memory (GB)", "dtrain", "PyTorch");
  table << row;
  for (const auto* part : {&plan.persistent, &plan.saved}) {
    for (const MemoryCategory& m : *part) {
      std::snprintf(row, sizeof(row), "%-48s %10.3f %10.3f\n", m.name.c_str(), gb(m.dtrain), gb(m.pytorch));
      table << row;
    }
  }
  std::snprintf(row, sizeof(row), "%-48s %10.3f %10.3f\n", "at the end of forward", gb(plan.forward_end),
                gb(plan.pytorch_total));
  table << row;
  std::snprintf(row, sizeof(row), "%-48s %10.3f\n", ("predicted peak (" + plan.peak_at + ")").c_str(),
                gb(plan.predicted_peak));
  table << row << "(dtrain: each allocation rounded to the caching allocator's class; both without cuDNN workspaces)\n";
  return table.str();
}

}  // namespace dtrain::train
