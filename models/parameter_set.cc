#include "models/parameter_set.h"

#include <algorithm>

#include "runtime/base/error.h"

namespace dtrain::models {

int ParameterSet::add(std::string name, runtime::Shape shape, ParamKind kind) {
  DTRAIN_CHECK(!finalized_) << "parameter " << name << " registered after the layout was fixed";
  ParamSlot slot{std::move(name), std::move(shape), kind, 0, -1};
  slot.numel = runtime::shape_numel(slot.shape);
  slots_.push_back(std::move(slot));
  return static_cast<int>(slots_.size()) - 1;
}

int ParameterSet::add_state(std::string name, int64_t numel) {
  DTRAIN_CHECK(!finalized_) << "state " << name << " registered after the layout was fixed";
  state_total_ = (state_total_ + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
  state_slots_.push_back(ParamSlot{std::move(name), {numel}, ParamKind::kBias, numel, state_total_});
  state_total_ += numel;
  return static_cast<int>(state_slots_.size()) - 1;
}

void ParameterSet::finalize() {
  DTRAIN_CHECK(!finalized_) << "parameter layout fixed twice";
  // Backward order: walk the registrations from the last one.
  int64_t offset = 0;
  for (auto it = slots_.rbegin(); it != slots_.rend(); ++it) {
    offset = (offset + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
    it->offset = offset;
    offset += it->numel;
    parameters_ += it->numel;
  }
  total_ = offset;
  params_ = runtime::Tensor(runtime::DType::kF32, {total_});
  state_ = runtime::Tensor(runtime::DType::kF32, {state_total_});
  std::fill(params_.data<float>(), params_.data<float>() + total_, 0.0f);
  std::fill(state_.data<float>(), state_.data<float>() + state_total_, 0.0f);
  finalized_ = true;
}

namespace {

int index_of(const std::vector<ParamSlot>& slots, const std::string& name, const char* what) {
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].name == name) return static_cast<int>(i);
  }
  DTRAIN_FAIL() << "no " << what << " named " << name << " in the model";
}

}  // namespace

int ParameterSet::find(const std::string& name) const {
  return index_of(slots_, name, "parameter");
}

int ParameterSet::find_state(const std::string& name) const {
  return index_of(state_slots_, name, "state");
}

float* ParameterSet::param(int id) {
  DTRAIN_CHECK(finalized_) << "parameters used before finalize()";
  return params_.data<float>() + slot(id).offset;
}

float* ParameterSet::grads_flat() {
  DTRAIN_CHECK(finalized_) << "gradients used before finalize()";
  if (grads_.numel() == 0 && total_ > 0) {
    grads_ = runtime::Tensor(runtime::DType::kF32, {total_});
    std::fill(grads_.data<float>(), grads_.data<float>() + total_, 0.0f);
  }
  return grads_.data<float>();
}

float* ParameterSet::grad(int id) {
  return grads_flat() + slot(id).offset;
}

float* ParameterSet::state(int id) {
  DTRAIN_CHECK(finalized_) << "state used before finalize()";
  return state_.data<float>() + state_slots_.at(static_cast<size_t>(id)).offset;
}

}  // namespace dtrain::models
