#include "train/observe/step_profile.h"

#include <algorithm>
#include <string>
#include <utility>

#include "runtime/base/error.h"
#include "runtime/io/atomic_file.h"
#include "runtime/io/json.h"

namespace dtrain::train {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The median over the steps of the value `of` picks, in milliseconds.
template <typename Of>
double median_ms(const std::vector<StepPhases>& steps, Of&& of) {
  std::vector<double> v;
  for (const StepPhases& s : steps) v.push_back(of(s) * 1e3);
  return median(std::move(v));
}

}  // namespace

void StepProfile::add(StepPhases phases) {
  // The bucket model cuts buckets out of the ranges in order: each gradient element exactly once,
  // front to back through the buffer (the layout's backward order).
  int64_t end = 0;
  for (size_t i = 0; i < phases.gradients.size(); ++i) {
    const GradientReady& g = phases.gradients[i];
    DTRAIN_CHECK(g.elements > 0 && g.offset >= end)
        << "profiled step's gradient range " << i << " is [" << g.offset << ", +" << g.elements << ")"
        << (g.elements > 0 ? ", before the end of the range reported before it at " + std::to_string(end)
                           : std::string(", of no elements"))
        << ": backward must report the ranges in buffer order, apart";
    end = g.offset + g.elements;
  }
  if (!steps_.empty()) {
    const std::vector<GradientReady>& first = steps_.front().gradients;
    DTRAIN_CHECK(phases.gradients.size() == first.size())
        << "profiled step reported " << phases.gradients.size() << " gradient ranges, the first one " << first.size();
    for (size_t i = 0; i < first.size(); ++i) {
      DTRAIN_CHECK(phases.gradients[i].offset == first[i].offset && phases.gradients[i].elements == first[i].elements)
          << "profiled step's gradient range " << i << " is [" << phases.gradients[i].offset << ", +"
          << phases.gradients[i].elements << "), the first step's [" << first[i].offset << ", +" << first[i].elements
          << ")";
    }
  }
  steps_.push_back(std::move(phases));
}

std::string StepProfile::json(const ProfileSource& source) const {
  DTRAIN_CHECK(!steps_.empty()) << "a step profile of no steps";
  std::vector<std::string> ranges;
  const std::vector<GradientReady>& first = steps_.front().gradients;
  for (size_t i = 0; i < first.size(); ++i) {
    ranges.push_back(
        runtime::JsonObject()
            .integer("offset", first[i].offset)
            .integer("elements", first[i].elements)
            .number("ready_ms", median_ms(steps_, [i](const StepPhases& s) { return s.gradients[i].ready; }), "%.4f")
            .str());
  }
  return runtime::JsonObject()
             .text("format", "dtrain-step-profile")
             .integer("version", 1)
             .text("model", source.model)
             .text("precision", source.precision)
             .text("device", source.device)
             .integer("batch_per_gpu", source.batch_per_gpu)
             .integer("accumulation_steps", source.accumulation_steps)
             .integer("world_size", source.world_size)
             .integer("steps_profiled", static_cast<int64_t>(steps_.size()))
             .number("step_ms", source.step_ms, "%.4f")
             .number("forward_ms", median_ms(steps_, [](const StepPhases& s) { return s.forward; }), "%.4f")
             .number("backward_ms", median_ms(steps_, [](const StepPhases& s) { return s.backward; }), "%.4f")
             .number("optimizer_ms", median_ms(steps_, [](const StepPhases& s) { return s.optimizer; }), "%.4f")
             .integer("gradient_bytes_per_element", 4)
             .integer("bucket_bytes", source.bucket_bytes)
             .integer("tail_bucket_bytes", source.tail_bucket_bytes)
             .integer("first_bucket_bytes", source.first_bucket_bytes)
             .raw("gradients", runtime::json_array(ranges, "    "))
             .str("  ") +
         "\n";
}

void StepProfile::write(const std::string& path, const ProfileSource& source, const std::string& what) const {
  runtime::write_file_atomically(path, json(source), what);
}

}  // namespace dtrain::train
