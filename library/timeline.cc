#include "library/timeline.h"

#include <cctype>
#include <cerrno>
#include <cstring>

#include "include/dtrain/dtrain.h"
#include "library/engine.h"
#include "runtime/base/steady_seconds.h"
#include "runtime/io/json.h"

namespace dtrain::library {
namespace {

constexpr int kPid = 0;  // rank 0, whose view this is

}  // namespace

std::string upper(const char* text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

void Timeline::start(const std::string& path) {
  std::lock_guard lock(mutex_);
  if (file_ != nullptr)
    throw AbiError(DTRAIN_ERR_INVALID_ARGUMENT,
                   "path: a timeline is already being written to '" + path_ + "'; call dtrain_timeline_stop first");
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr)
    throw AbiError(DTRAIN_ERR_INVALID_ARGUMENT,
                   "path: cannot write the timeline to '" + path + "': " + std::strerror(errno));
  file_ = file;
  path_ = path;
  zero_ = runtime::steady_seconds();
  first_ = true;
  tracks_.clear();
  std::fputs("{\"traceEvents\": [\n", file_);
  emit(runtime::JsonObject()
           .text("name", "process_name")
           .text("ph", "M")
           .integer("pid", kPid)
           .raw("args", runtime::JsonObject().text("name", "dtrain rank 0: named operations").str())
           .str());
  active_ = true;
}

void Timeline::stop() noexcept {
  std::lock_guard lock(mutex_);
  active_ = false;
  if (file_ == nullptr) return;
  std::fputs("\n],\n\"displayTimeUnit\": \"ms\"}\n", file_);
  std::fclose(file_);
  file_ = nullptr;
}

double Timeline::now_us() const {
  return (runtime::steady_seconds() - zero_) * 1e6;
}

void Timeline::emit(const std::string& event) {
  if (!first_) std::fputs(",\n", file_);
  std::fputs(event.c_str(), file_);
  first_ = false;
}

int Timeline::track(const std::string& name) {
  auto [it, fresh] = tracks_.try_emplace(name);
  if (fresh) {
    it->second.tid = static_cast<int>(tracks_.size());
    emit(runtime::JsonObject()
             .text("name", "thread_name")
             .text("ph", "M")
             .integer("pid", kPid)
             .integer("tid", it->second.tid)
             .raw("args", runtime::JsonObject().text("name", name).str())
             .str());
  }
  return it->second.tid;
}

void Timeline::begin(const std::string& name, const std::string& phase, const std::string& args) {
  if (!active()) return;
  std::lock_guard lock(mutex_);
  if (file_ == nullptr) return;
  const int tid = track(name);
  ++tracks_[name].open;
  runtime::JsonObject event;
  event.text("name", phase).text("ph", "B").integer("pid", kPid).integer("tid", tid).number("ts", now_us(), "%.3f");
  if (!args.empty()) event.raw("args", args);
  emit(event.str());
}

void Timeline::end(const std::string& name) {
  if (!active()) return;
  std::lock_guard lock(mutex_);
  auto it = tracks_.find(name);
  // A phase begun before this timeline started has no begin event in it.
  if (file_ == nullptr || it == tracks_.end() || it->second.open == 0) return;
  --it->second.open;
  emit(runtime::JsonObject()
           .text("ph", "E")
           .integer("pid", kPid)
           .integer("tid", it->second.tid)
           .number("ts", now_us(), "%.3f")
           .str());
}

void Timeline::instant(const std::string& name, const std::string& what, const std::string& args) {
  if (!active()) return;
  std::lock_guard lock(mutex_);
  if (file_ == nullptr) return;
  runtime::JsonObject event;
  event.text("name", what)
      .text("ph", "i")
      .text("s", "t")
      .integer("pid", kPid)
      .integer("tid", track(name))
      .number("ts", now_us(), "%.3f");
  if (!args.empty()) event.raw("args", args);
  emit(event.str());
}

}  // namespace dtrain::library
