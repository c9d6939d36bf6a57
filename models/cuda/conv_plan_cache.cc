#include "models/cuda/conv_plan_cache.h"

#include <cuda_runtime_api.h>

#include <cctype>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "models/conv_plan_file.h"
#include "runtime/base/env.h"
#include "runtime/base/log.h"
#include "runtime/cuda/cuda_check.h"

namespace dtrain::models::cuda {
namespace {

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

}  // namespace

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
      std::shared_ptr<const ConvPlan> rebuilt = rebuild_conv_plan(key, stored->second, device);
      if (rebuilt != nullptr && conv_plan_runs(handle, *rebuilt, measure_on)) plan = std::move(rebuilt);
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
      plan = measure_conv_plan(handle, key, measure_on, device);
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
