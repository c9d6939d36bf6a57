#include "train/checkpoint/torchvision_weights.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <vector>

#include "runtime/base/error.h"

namespace dtrain::train {
namespace {

constexpr char kRunningMean[] = ".running_mean";
constexpr char kBatchesTracked[] = ".num_batches_tracked";

// The BN layer of a state slot named "<bn>.running_mean", or empty.
std::string norm_of(const std::string& state_name) {
  const std::string suffix = kRunningMean;
  if (state_name.size() <= suffix.size() ||
      state_name.compare(state_name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return {};
  return state_name.substr(0, state_name.size() - suffix.size());
}

// One tensor of the file as the model sees it: where its values go (null: num_batches_tracked).
struct Expected {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  float* data = nullptr;
};

// The model's tensors: the parameters in build order, then each BN's running statistics with its
// num_batches_tracked (load_state_dict does not care about the order).
std::vector<Expected> expected_tensors(models::ParameterSet& params) {
  std::vector<Expected> out;
  for (size_t id = 0; id < params.slots().size(); ++id) {
    const models::ParamSlot& slot = params.slots()[id];
    out.push_back({slot.name, "F32", slot.shape, params.param(static_cast<int>(id))});
  }
  for (size_t id = 0; id < params.state_slots().size(); ++id) {
    const models::ParamSlot& slot = params.state_slots()[id];
    out.push_back({slot.name, "F32", {slot.numel}, params.state(static_cast<int>(id))});
    const std::string norm = norm_of(slot.name);
    if (!norm.empty()) out.push_back({norm + kBatchesTracked, "I64", {}, nullptr});
  }
  return out;
}

}  // namespace

void export_torchvision_weights(const std::string& path, models::ParameterSet& params, int64_t num_batches_tracked,
                                const runtime::SafetensorsMetadata& metadata) {
  std::vector<runtime::SafetensorsView> views;
  for (const Expected& t : expected_tensors(params)) {
    const void* data = t.data != nullptr ? static_cast<const void*>(t.data) : &num_batches_tracked;
    views.push_back({t.name, t.dtype, t.shape, data});
  }
  runtime::write_safetensors(path, views, metadata);
}

std::string import_torchvision_weights(const std::string& path, models::ParameterSet& params,
                                       const WeightImport& options) {
  runtime::SafetensorsReader file(path);
  const std::string head = options.classifier + ".";
  const auto is_head = [&](const std::string& name) { return options.reinit_classifier && name.rfind(head, 0) == 0; };
  const std::vector<Expected> expected = expected_tensors(params);
  std::set<std::string> names;
  std::vector<std::string> missing;
  for (const Expected& t : expected) {
    names.insert(t.name);
    if (is_head(t.name)) continue;
    const runtime::SafetensorsEntry* e = file.find(t.name);
    if (e == nullptr) {
      missing.push_back(t.name);
      continue;
    }
    DTRAIN_USAGE_CHECK(e->dtype == t.dtype)
        << path << ": tensor " << t.name << " is " << e->dtype << ", the model takes " << t.dtype
        << (t.dtype == "F32" ? " (save the state_dict after model.float())" : "");
    const bool classifier = t.name.rfind(head, 0) == 0;
    DTRAIN_USAGE_CHECK(e->shape == t.shape)
        << path << ": tensor " << t.name << " has shape " << runtime::shape_text(e->shape) << ", the model "
        << runtime::shape_text(t.shape)
        << (classifier ? " (another class count: --reinit-classifier starts the classifier afresh for this dataset)"
                       : " (another architecture or width?)");
  }
  if (!missing.empty()) {
    DTRAIN_USAGE_FAIL() << path << ": tensor " << missing.front() << " of the model is not in the file"
                        << (missing.size() > 1 ? " (nor " + std::to_string(missing.size() - 1) + " more)" : "")
                        << " (another depth or architecture?)";
  }
  std::vector<std::string> extra;
  for (const runtime::SafetensorsEntry& e : file.entries()) {
    if (!names.count(e.name) && !is_head(e.name)) extra.push_back(e.name);
  }
  if (!extra.empty()) {
    DTRAIN_USAGE_FAIL() << path << ": tensor " << extra.front() << " is not in the model"
                        << (extra.size() > 1 ? " (nor " + std::to_string(extra.size() - 1) + " more)" : "")
                        << " (another depth or architecture?)";
  }
  // Every check passed: now the values.
  size_t tensors = 0;
  int64_t values = 0;
  for (const Expected& t : expected) {
    if (is_head(t.name)) continue;
    const runtime::SafetensorsEntry& e = *file.find(t.name);
    if (t.data != nullptr) {
      file.read(e, t.data);
      const size_t count = e.bytes() / sizeof(float);
      const float* bad = std::find_if(t.data, t.data + count, [](float v) { return !std::isfinite(v); });
      DTRAIN_USAGE_CHECK(bad == t.data + count)
          << path << ": tensor " << t.name << " holds " << *bad << " at element " << bad - t.data << " of " << count
          << " (a diverged or damaged model; export the weights of a finite one)";
      values += static_cast<int64_t>(count);
    } else {
      int64_t tracked = 0;
      file.read(e, &tracked);
    }
    ++tensors;
  }
  std::ostringstream summary;
  summary << tensors << " tensors (" << values << " values) from " << path;
  if (options.reinit_classifier) summary << "; classifier " << options.classifier << " initialized afresh";
  return summary.str();
}

}  // namespace dtrain::train
