#include "train/engine/sgd.h"

#include <algorithm>

#include "runtime/base/error.h"

namespace dtrain::train {

std::vector<DecayRange> decay_ranges(const models::ParameterSet& params, float weight_decay, bool exempt_norm_and_bias,
                                     float backbone_lr_scale, const std::string& classifier) {
  const std::string head = classifier + ".";
  std::vector<DecayRange> ranges;
  std::vector<models::ParamSlot> slots = params.slots();
  std::sort(slots.begin(), slots.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  for (const models::ParamSlot& s : slots) {
    const bool exempt = exempt_norm_and_bias && s.kind != models::ParamKind::kWeight;
    const float wd = exempt ? 0.0f : weight_decay;
    const float scale = s.name.rfind(head, 0) == 0 ? 1.0f : backbone_lr_scale;
    // A slot's range starts where the previous one ended: the alignment gap before the slot
    // (zeros that stay zero under any decay) goes with it, so the ranges tile the flat buffer.
    const size_t begin = ranges.empty() ? 0 : ranges.back().end;
    const auto end = static_cast<size_t>(s.offset + s.numel);
    if (!ranges.empty() && ranges.back().weight_decay == wd && ranges.back().lr_scale == scale) {
      ranges.back().end = end;  // merge runs with the same decay and scale: fewer, longer loops
    } else {
      ranges.push_back(DecayRange{begin, end, wd, scale});
    }
  }
  return ranges;
}

Sgd::Sgd(size_t count, std::vector<DecayRange> ranges, SgdOptions options) : options_(options), momentum_(count, 0.0f) {
  set_ranges(std::move(ranges));
  DTRAIN_USAGE_CHECK(options_.momentum >= 0 && options_.momentum < 1)
      << "momentum " << options_.momentum << " outside [0, 1)";
  DTRAIN_USAGE_CHECK(options_.weight_decay >= 0) << "weight decay must not be negative";
  DTRAIN_USAGE_CHECK(!options_.nesterov || options_.momentum > 0) << "Nesterov momentum needs momentum > 0";
}

void Sgd::set_ranges(std::vector<DecayRange> ranges) {
  size_t expected = 0;
  for (const DecayRange& r : ranges) {
    DTRAIN_CHECK(r.begin == expected && r.end >= r.begin) << "decay ranges must tile the buffer in order";
    DTRAIN_CHECK(r.lr_scale >= 0) << "a negative learning-rate scale";
    expected = r.end;
  }
  DTRAIN_CHECK(expected == momentum_.size())
      << "decay ranges cover " << expected << " of " << momentum_.size() << " elements";
  ranges_ = std::move(ranges);
}

void Sgd::step(float* params, const float* grads, float lr_of_schedule) {
  const float mu = static_cast<float>(options_.momentum);
  float* buf = momentum_.data();
  for (const DecayRange& r : ranges_) {
    if (r.lr_scale == 0) continue;  // frozen: no update, no momentum
    const float wd = r.weight_decay;
    const float lr = lr_of_schedule * r.lr_scale;  // exactly lr_of_schedule at scale 1
    if (options_.nesterov) {
      for (size_t i = r.begin; i < r.end; ++i) {
        const float g = grads[i] + wd * params[i];
        buf[i] = mu * buf[i] + g;
        params[i] -= lr * (g + mu * buf[i]);
      }
    } else {
      for (size_t i = r.begin; i < r.end; ++i) {
        const float g = grads[i] + wd * params[i];
        buf[i] = mu * buf[i] + g;
        params[i] -= lr * buf[i];
      }
    }
  }
}

}  // namespace dtrain::train
