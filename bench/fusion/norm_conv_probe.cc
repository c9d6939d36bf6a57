// dtrain-norm-conv-probe: does cuDNN fuse ResNet-50's batch norm into its convolutions on this GPU,
// and what would it save? For each bottleneck convolution shape and each graph variant (element
// type x pattern, norm_conv_graph.h), it builds the fused graph (previous BN's scale + bias + ReLU
// as the prologue of the forward convolution or of its weight gradient, GenStats of the forward
// output as its epilogue), reports which engines cuDNN offers and finalizes, checks every fused
// plan and the unfused path on small instances against a float64 CPU reference, and times the
// fused plan against the unfused sequence at batch --batch. Prints a table; --json writes it. Exit
// status: 0, 1 on a numerical mismatch, 3 when cuDNN refused a descriptor of a fused graph, 4 when
// cuDNN failed on a row's plain convolution, variant pack or run (each printed in its row; the other
// rows and variants still run and the JSON is still written).
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/common/result_file.h"
#include "bench/fusion/norm_conv_measure.h"
#include "bench/fusion/norm_conv_workload.h"
#include "runtime/base/cli.h"
#include "runtime/base/error.h"
#include "runtime/base/top_level_handler.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/stream.h"
#include "runtime/io/atomic_file.h"
#include "runtime/io/json.h"

namespace dtrain::bench::fusion {
namespace {

constexpr int kExitRejected = 3;
constexpr int kExitCudnnError = 4;

struct Variant {
  const char* name;
  Element element;
  Direction direction;
  bool prologue, stats, stats_from_accumulator;
};

// fp16-norm-conv-stats and fp16-norm-wgrad are cuDNN's documented ConvBNfprop and ConvBNwgrad
// patterns; the bf16 ones are what the step would need (cuDNN documents those patterns for fp16
// only, so they may be unsupported); the norm-conv ones (prologue, no statistics) ask whether any
// engine applies a BN in a convolution's prologue at all.
const std::vector<Variant>& all_variants() {
  constexpr Direction kFprop = Direction::kFprop, kWgrad = Direction::kWgrad;
  static const std::vector<Variant> v = {
      {"fp16-norm-conv-stats", Element::kFp16, kFprop, true, true, false},
      {"fp16-conv-stats", Element::kFp16, kFprop, false, true, false},
      {"fp16-norm-conv", Element::kFp16, kFprop, true, false, false},
      {"fp16-norm-wgrad", Element::kFp16, kWgrad, true, false, false},
      {"bf16-norm-conv-stats", Element::kBf16, kFprop, true, true, false},
      {"bf16-norm-conv-accstats", Element::kBf16, kFprop, true, true, true},
      {"bf16-conv-stats", Element::kBf16, kFprop, false, true, false},
      {"bf16-norm-conv", Element::kBf16, kFprop, true, false, false},
      {"bf16-norm-wgrad", Element::kBf16, kWgrad, true, false, false},
  };
  return v;
}

std::string variant_names() {
  std::string names;
  for (const Variant& v : all_variants()) names += (names.empty() ? "" : ", ") + std::string(v.name);
  return names;
}

// A ResNet-50 bottleneck convolution (torchvision v1.5: the stride on the 3x3). with_prologue: how
// many of them take relu(bn(previous conv)) as input (conv2, conv3 of a block); without: how many
// read a block input (conv1 after a residual join or the stem's pooling, the downsample), which
// can fuse only the statistics.
struct ResNetShape {
  int hw, c, k, r, stride, with_prologue, without;
  bool core;  // in the default set
  std::string name() const {
    std::ostringstream s;
    s << hw << "x" << hw << " " << c << "->" << k << " " << r << "x" << r;
    if (stride > 1) s << " s" << stride;
    return s.str();
  }
};

const std::vector<ResNetShape>& resnet50_shapes() {
  static const std::vector<ResNetShape> s = {
      {56, 64, 64, 1, 1, 0, 1, true},      {56, 64, 64, 3, 1, 3, 0, true},     {56, 64, 256, 1, 1, 3, 1, true},
      {56, 256, 64, 1, 1, 0, 2, false},    {56, 256, 128, 1, 1, 0, 1, false},  {56, 128, 128, 3, 2, 1, 0, false},
      {56, 256, 512, 1, 2, 0, 1, false},   {28, 128, 512, 1, 1, 4, 0, false},  {28, 512, 128, 1, 1, 0, 3, false},
      {28, 128, 128, 3, 1, 3, 0, true},    {28, 512, 256, 1, 1, 0, 1, false},  {28, 256, 256, 3, 2, 1, 0, false},
      {28, 512, 1024, 1, 2, 0, 1, false},  {14, 256, 1024, 1, 1, 6, 0, true},  {14, 1024, 256, 1, 1, 0, 5, false},
      {14, 256, 256, 3, 1, 5, 0, false},   {14, 1024, 512, 1, 1, 0, 1, false}, {14, 512, 512, 3, 2, 1, 0, false},
      {14, 1024, 2048, 1, 2, 0, 1, false}, {7, 512, 2048, 1, 1, 3, 0, false},  {7, 2048, 512, 1, 1, 0, 2, false},
      {7, 512, 512, 3, 1, 2, 0, true},
  };
  return s;
}

models::Conv2dShape conv_shape(const ResNetShape& s, int batch) {
  models::Conv2dShape g;
  g.batch = batch, g.in_channels = s.c, g.in_h = g.in_w = s.hw, g.out_channels = s.k;
  g.kernel_h = g.kernel_w = s.r, g.stride_h = g.stride_w = s.stride, g.pad_h = g.pad_w = s.r / 2;
  return g;
}

struct Options {
  int batch = 256;
  std::string shapes = "core";
  std::string variants = "all";
  int warmup = 10;
  int iterations = 50;
  int runs_per_sample = 20;
  int candidates = 8;
  bool no_runtime_compiled = false;
  uint64_t seed = 0;
  std::string json;
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream s(text);
  for (std::string part; std::getline(s, part, ',');)
    if (!part.empty()) parts.push_back(part);
  return parts;
}

bool parse(int argc, char** argv, Options& o) {
  namespace po = runtime::po;
  po::options_description d("dtrain-norm-conv-probe options");
  const std::string variants_help = "all, or of " + variant_names() + ", comma-separated";
  d.add_options()("batch", po::value(&o.batch)->default_value(o.batch), "images per convolution at full size")(
      "shapes", po::value(&o.shapes)->default_value(o.shapes),
      "core (six bottleneck shapes), resnet50 (every bottleneck shape), or names as printed, comma-separated")(
      "variants", po::value(&o.variants)->default_value(o.variants), variants_help.c_str())(
      "warmup", po::value(&o.warmup)->default_value(o.warmup), "untimed runs before each timing")(
      "iterations", po::value(&o.iterations)->default_value(o.iterations),
      "timed samples (the median is reported; >= 20)")(
      "runs-per-sample", po::value(&o.runs_per_sample)->default_value(o.runs_per_sample),
      "runs queued back to back per timed sample (its time is divided by them)")(
      "candidates", po::value(&o.candidates)->default_value(o.candidates), "cuDNN plans timed per graph to choose one")(
      "no-runtime-compiled", runtime::switch_value(), "refuse engines that compile at plan time, as the step does")(
      "seed", po::value(&o.seed)->default_value(o.seed), "random inputs' seed; 0: a fresh one (printed)")(
      "json", po::value(&o.json), "also write the results to this JSON file");
  const runtime::ParsedCommandLine parsed = runtime::parse_command_line(argc, argv, d);
  if (parsed.help) {
    std::printf("%s", runtime::usage("dtrain-norm-conv-probe", d).c_str());
    return false;
  }
  o.no_runtime_compiled = runtime::switch_on(parsed.values, "no-runtime-compiled");
  DTRAIN_USAGE_CHECK(o.batch > 0) << "--batch " << o.batch << ": must be positive";
  DTRAIN_USAGE_CHECK(o.iterations >= 20) << "--iterations " << o.iterations << ": at least 20 for a median";
  DTRAIN_USAGE_CHECK(o.runs_per_sample >= 1)
      << "--runs-per-sample " << o.runs_per_sample << ": at least 1 run per timed sample";
  DTRAIN_USAGE_CHECK(o.warmup >= 0) << "--warmup " << o.warmup << ": must not be negative";
  DTRAIN_USAGE_CHECK(o.candidates > 0) << "--candidates " << o.candidates << ": must be positive";
  if (o.seed == 0) o.seed = std::random_device{}() | 1;
  return true;
}

std::vector<Variant> chosen_variants(const Options& o) {
  if (o.variants == "all") return all_variants();
  std::vector<Variant> chosen;
  for (const std::string& name : split(o.variants)) {
    bool found = false;
    for (const Variant& v : all_variants())
      if (name == v.name) chosen.push_back(v), found = true;
    DTRAIN_USAGE_CHECK(found) << "--variants: unknown variant '" << name << "' (see --help)";
  }
  return chosen;
}

std::vector<ResNetShape> chosen_shapes(const Options& o) {
  std::vector<ResNetShape> chosen;
  if (o.shapes == "core" || o.shapes == "resnet50") {
    for (const ResNetShape& s : resnet50_shapes())
      if (s.core || o.shapes == "resnet50") chosen.push_back(s);
    return chosen;
  }
  for (const std::string& name : split(o.shapes)) {
    bool found = false;
    for (const ResNetShape& s : resnet50_shapes())
      if (name == s.name()) chosen.push_back(s), found = true;
    DTRAIN_USAGE_CHECK(found) << "--shapes: unknown shape '" << name
                              << "' (names as in the table: \"56x56 64->64 3x3\")";
  }
  return chosen;
}

GraphSpec spec_of(const Variant& v, const models::Conv2dShape& g) {
  GraphSpec spec;
  spec.shape = g, spec.element = v.element, spec.direction = v.direction, spec.prologue = v.prologue;
  spec.stats = v.stats, spec.stats_from_accumulator = v.stats_from_accumulator;
  return spec;
}

// A cuDNN handle for the probe's life.
struct Handle {
  cudnnHandle_t raw = nullptr;
  Handle() { DTRAIN_CUDNN_CHECK(cudnnCreate(&raw)) << "creating a cuDNN handle"; }
  ~Handle() { cudnnDestroy(raw); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

struct Outcome {
  bool mismatch = false, rejected = false, cudnn_error = false;
  std::vector<std::string> checks, rows;  // JSON objects
};

// The small-instance checks of one variant: 1x1 16->32 and 3x3 16->16, N=2, 8x8.
void run_checks(cudnnHandle_t handle, cudaStream_t stream, const Variant& v, uint64_t seed, const EngineFilter& filter,
                Outcome& out) {
  for (const ResNetShape& s : {ResNetShape{8, 16, 32, 1, 1, 0, 0, false}, ResNetShape{8, 16, 16, 3, 1, 0, 0, false}}) {
    runtime::JsonObject j;
    j.text("variant", v.name).text("shape", s.name()).integer("batch", 2);
    try {
      const CheckResult r = check_small(handle, stream, spec_of(v, conv_shape(s, 2)), seed, filter);
      std::printf(
          "check %-24s N=2 %-18s %s: %d fused plan(s) checked, worst %s error %.3g, stats error %.3g "
          "(bound %.3g)%s%s%s\n",
          v.name, s.name().c_str(),
          !r.passed     ? "MISMATCH"
          : r.supported ? "ok"
                        : "unsupported (unfused ok)",
          r.plans_checked, r.output.c_str(), r.worst_output, r.worst_stats, r.bound_output,
          r.needs_zeroed_stats ? "; a plan's sum/sqsum add onto their outputs (need zeroing)" : "",
          r.passed ? "" : ": ", r.failure.c_str());
      out.mismatch |= !r.passed;
      j.boolean("supported", r.supported).boolean("passed", r.passed).integer("plans_checked", r.plans_checked);
      j.text("output", r.output).number("worst_output_error", r.worst_output);
      j.number("worst_stats_error", r.worst_stats).number("bound", r.bound_output);
      j.boolean("needs_zeroed_stats", r.needs_zeroed_stats);
      if (!r.passed) j.text("failure", r.failure);
    } catch (const runtime::CudnnError& e) {
      std::printf("check %-24s N=2 %-18s REJECTED by cuDNN: %s\n", v.name, s.name().c_str(), e.what());
      out.rejected = true;
      j.text("rejected", e.what());
    }
    out.checks.push_back(j.str());
  }
}

// Engines by cuDNN's index; one whose index cuDNN does not report by its list and place ("?A3").
std::string engine_list(const std::vector<EngineNotes>& engines) {
  std::ostringstream s;
  for (size_t i = 0; i < engines.size(); ++i) {
    const EngineNotes& e = engines[i];
    s << (i ? "," : "");
    if (e.index >= 0)
      s << e.index;
    else
      s << "?" << (e.heuristic == "A" ? "A" : "F") << e.position;
    s << (e.runtime_compiled ? "*" : "") << (e.nondeterministic ? "n" : "") << (e.down_converts ? "d" : "");
  }
  return engines.empty() ? "-" : s.str();
}

std::string engines_json(const std::vector<EngineNotes>& engines) {
  std::vector<std::string> items;
  for (const EngineNotes& e : engines) {
    runtime::JsonObject j;
    j.integer("engine", e.index).boolean("runtime_compiled", e.runtime_compiled).text("heuristic", e.heuristic);
    j.integer("position", e.position).boolean("nondeterministic", e.nondeterministic);
    j.boolean("down_converts", e.down_converts);
    if (!e.refusal.empty()) j.text("refusal", e.refusal);
    items.push_back(j.str());
  }
  return runtime::json_array(items);
}

std::string heuristics_json(const std::vector<HeuristicAnswer>& answers) {
  std::vector<std::string> items;
  for (const HeuristicAnswer& a : answers) {
    runtime::JsonObject j;
    j.text("mode", a.mode).text("status", cudnnGetErrorString(a.status)).integer("offered", a.offered);
    if (!a.failed_at.empty()) j.text("failed_at", a.failed_at);
    items.push_back(j.str());
  }
  return runtime::json_array(items);
}

void print_row(const std::string& shape, const Variant& v, const Measurement& m) {
  std::printf("%-20s %-24s %8.3f %8.3f %8.3f %8.3f ", shape.c_str(), v.name, m.conv_ms, m.prologue_ms, m.stats_ms,
              m.unfused_ms);
  if (m.status == "unsupported") {
    std::printf("%8s %8s %7s  %-5s unsupported (%s; refused %s)\n", "-", "-", "-", "-", describe(m.heuristics).c_str(),
                engine_list(m.refused).c_str());
    return;
  }
  if (m.status != "ok") {
    std::printf("%8s %8s %7s  %-5s %s\n", "-", "-", "-", "-", m.status.c_str());
    return;
  }
  const double saving = m.unfused_ms - m.fused_ms;
  std::printf("%8.3f %8.3f %6.1f%%  %-5s %s\n", m.fused_ms, saving, 100.0 * saving / m.unfused_ms,
              m.agree ? (m.needs_zeroed_stats ? "yes,z" : "yes") : "NO", engine_list(m.engines).c_str());
}

std::string row_json(const std::string& shape, const Variant& v, const Measurement& m, int count) {
  runtime::JsonObject j;
  j.text("shape", shape).text("variant", v.name).text("status", m.status).integer("count_in_resnet50", count);
  j.integer("conv_engine", m.conv_engine).number("conv_ms", m.conv_ms).number("prologue_ms", m.prologue_ms);
  j.number("stats_ms", m.stats_ms).number("unfused_parts_sum_ms", m.parts_ms()).number("unfused_ms", m.unfused_ms);
  j.integer("offered", m.offered).raw("heuristics", heuristics_json(m.heuristics));
  j.raw("engines", engines_json(m.engines)).raw("refused", engines_json(m.refused));
  if (m.status == "ok") {
    j.number("fused_ms", m.fused_ms).number("saving_ms", m.unfused_ms - m.fused_ms);
    j.text("compared", m.compared).boolean("agree", m.agree).number("agree_error", m.agree_error);
    j.boolean("needs_zeroed_stats", m.needs_zeroed_stats);
    j.text("fused_plan_description", m.plan_description);
  }
  return j.str();
}

// How many convolutions of ResNet-50 a variant's fusion applies to at this shape.
int applicable(const ResNetShape& s, const Variant& v) {
  return v.prologue ? s.with_prologue : s.with_prologue + s.without;
}

// What a variant's fused plan replaces, for the summary.
const char* replaces(const Variant& v) {
  if (v.direction == Direction::kWgrad) return "backward: prologue kernel (recomputing the activation) + wgrad";
  if (v.prologue) return v.stats ? "forward: prologue + convolution + statistics" : "forward: prologue + convolution";
  return "forward: convolution + statistics";
}

// Measurements by shape, then variant.
using Results = std::vector<std::vector<Measurement>>;

// A fully fused step for one element type: the forward norm-conv-stats graph (no activation
// stored) and the norm-wgrad graph in place of the plain wgrad that read the stored activation,
// over the shapes where both ran. Prints it; returns its JSON, "" when either was not measured.
std::string fused_step(Element e, const std::vector<Variant>& variants, const std::vector<ResNetShape>& shapes,
                       const Results& results) {
  size_t fwd = variants.size(), bwd = variants.size();
  for (size_t i = 0; i < variants.size(); ++i) {
    const Variant& v = variants[i];
    if (v.element != e || !v.prologue || v.stats_from_accumulator) continue;
    if (v.direction == Direction::kFprop && v.stats) fwd = i;
    if (v.direction == Direction::kWgrad) bwd = i;
  }
  if (fwd == variants.size() || bwd == variants.size()) return "";
  double saving = 0;
  int counted = 0;
  for (size_t j = 0; j < shapes.size(); ++j) {
    const Measurement &f = results[j][fwd], &b = results[j][bwd];
    if (f.status != "ok" || b.status != "ok") continue;
    saving += applicable(shapes[j], variants[fwd]) * (f.unfused_ms - f.fused_ms + b.conv_ms - b.fused_ms);
    ++counted;
  }
  const std::string name = std::string(variants[fwd].name) + " + " + variants[bwd].name;
  const std::string label = std::string(element_name(e)) + " fused step";
  std::printf(
      "  %-24s %8.3f ms  (%s: no stored activation, the wgrad fused in place of the plain one; %d of %zu "
      "shapes)\n",
      label.c_str(), saving, name.c_str(), counted, shapes.size());
  return runtime::JsonObject().text("variant", name).number("saving_ms", saving).integer("shapes", counted).str();
}

// Per variant, the saving per ResNet-50 step over the measured shapes: each shape's saving times
// the convolutions it applies to; for a weight gradient also against the plain wgrad reading the
// activation that the forward stored. Then the fully fused step per element type. Prints them and
// returns their JSON.
std::vector<std::string> estimates(const std::vector<Variant>& variants, const std::vector<ResNetShape>& shapes,
                                   const Results& results) {
  std::vector<std::string> items;
  std::printf("\nsaving per ResNet-50 step over the shapes above (saving x convolutions it applies to):\n");
  for (size_t i = 0; i < variants.size(); ++i) {
    double saving = 0, vs_stored = 0;
    for (size_t j = 0; j < shapes.size(); ++j) {
      const Measurement& m = results[j][i];
      if (m.status != "ok") continue;
      saving += applicable(shapes[j], variants[i]) * (m.unfused_ms - m.fused_ms);
      vs_stored += applicable(shapes[j], variants[i]) * (m.conv_ms - m.fused_ms);
    }
    runtime::JsonObject j;
    j.text("variant", variants[i].name).text("replaces", replaces(variants[i])).number("saving_ms", saving);
    std::printf("  %-24s %8.3f ms  (%s -> one plan", variants[i].name, saving, replaces(variants[i]));
    if (variants[i].direction == Direction::kWgrad) {
      std::printf("; %.3f ms against the plain wgrad of a stored activation", vs_stored);
      j.number("saving_vs_stored_activation_ms", vs_stored);
    }
    std::printf(")\n");
    items.push_back(j.str());
  }
  for (const Element e : {Element::kFp16, Element::kBf16}) {
    const std::string step = fused_step(e, variants, shapes, results);
    if (!step.empty()) items.push_back(step);
  }
  return items;
}

int probe_main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it comes, also into a pipe or a log
  Options o;
  if (!parse(argc, argv, o)) return 0;
  const std::vector<Variant> variants = chosen_variants(o);
  const std::vector<ResNetShape> shapes = chosen_shapes(o);
  cudaDeviceProp device{};
  DTRAIN_CUDA_CHECK(cudaGetDeviceProperties(&device, 0)) << "reading GPU 0's properties";
  DTRAIN_CUDA_CHECK(cudaSetDevice(0));
  std::printf("dtrain-norm-conv-probe: %s (sm_%d%d), cuDNN %zu, batch %d, seed %llu\n", device.name, device.major,
              device.minor, cudnnGetVersion(), o.batch, static_cast<unsigned long long>(o.seed));
  const runtime::CudaStream stream(0);
  const Handle handle;
  const EngineFilter fused_filter{!o.no_runtime_compiled, true, true};
  Outcome out;
  for (const Variant& v : variants) run_checks(handle.raw, stream.get(), v, o.seed, fused_filter, out);

  std::printf("\n%-20s %-24s %8s %8s %8s %8s %8s %8s %7s  %-5s %s\n", "shape", "variant", "conv_ms", "prolog", "stats",
              "unfused", "fused", "saving", "saving", "agree",
              "fused engines (chosen first; *: runtime-compiled, n: nondeterministic)");
  const TimingOptions timing{o.warmup, o.iterations, o.runs_per_sample, o.candidates, fused_filter, o.seed};
  Results results(shapes.size());
  for (size_t j = 0; j < shapes.size(); ++j) {
    for (size_t i = 0; i < variants.size(); ++i) {
      const Variant& v = variants[i];
      const Measurement m = measure(handle.raw, stream.get(), spec_of(v, conv_shape(shapes[j], o.batch)), timing);
      print_row(shapes[j].name(), v, m);
      out.rejected |= m.status.rfind("rejected", 0) == 0;
      out.cudnn_error |= m.status.rfind("error", 0) == 0;
      out.mismatch |= m.status == "ok" && !m.agree;
      out.rows.push_back(row_json(shapes[j].name(), v, m, applicable(shapes[j], v)));
      results[j].push_back(m);
    }
  }
  const std::vector<std::string> saving_items = estimates(variants, shapes, results);
  if (!o.json.empty()) {
    runtime::JsonObject j;
    j.text("benchmark", "norm_conv_probe").text("date", utc_date()).text("command", command_line(argc, argv));
    j.text("device", device.name).integer("cudnn_version", static_cast<int64_t>(cudnnGetVersion()));
    j.integer("batch", o.batch).integer("seed", static_cast<int64_t>(o.seed)).integer("iterations", o.iterations);
    j.integer("runs_per_sample", o.runs_per_sample);
    j.raw("checks", runtime::json_array(out.checks, "  ")).raw("rows", runtime::json_array(out.rows, "  "));
    j.raw("estimates", runtime::json_array(saving_items, "  "));
    runtime::write_file_atomically(o.json, j.str("  ") + "\n", "the probe's JSON results");
  }
  if (out.mismatch) std::printf("FAIL: a fused or unfused result disagrees with its reference (above)\n");
  if (out.rejected) std::printf("cuDNN refused a descriptor of a fused graph (REJECTED / rejected above)\n");
  if (out.cudnn_error) std::printf("cuDNN failed on a row's plain convolution, variant pack or run (error above)\n");
  return out.mismatch ? 1 : out.rejected ? kExitRejected : out.cudnn_error ? kExitCudnnError : 0;
}

}  // namespace
}  // namespace dtrain::bench::fusion

int main(int argc, char** argv) {
  return dtrain::runtime::run_main_without_mpi(argc, argv, dtrain::bench::fusion::probe_main);
}
