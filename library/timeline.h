#pragma once
// dtrain_timeline_start / dtrain_timeline_stop: rank 0's view of the named operations as a Chrome
// trace (the JSON that Perfetto and chrome://tracing open), as Horovod's timeline.
//
// One file, written by rank 0 alone: rank 0's coordinator sees every rank's submissions and its
// background thread executes every agreed operation, so its view holds the negotiation of all
// ranks. Each operation name is one track (a "thread" named after it, in process 0), holding its
// phases as nested begin/end events:
//   NEGOTIATE_<KIND>  from the first rank's request reaching rank 0 until the last one's (an
//                     instant event "rank R ready" marks each), or a MISMATCH / STALLED instant;
//   QUEUE             agreed, waiting for the operations ahead of it in the agreed order;
//   <KIND>            the collective (ALLREDUCE, BROADCAST, ...), with its args: the fused
//                     group's size and index, bytes, dtype, device. On device buffers it spans
//                     queueing the work on the library's stream (the GPU runs it later);
//   DONE              an instant event with the status, when the operation has finished (device
//                     buffers: when its work is queued on the library's stream).
// Events are written as they happen (buffered), so a long run costs no memory; stop (or
// dtrain_shutdown) closes the JSON array, and the file is valid JSON from then on.
//
// Thread-safe: the background thread records, the caller's thread starts and stops.
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

namespace dtrain::library {

class Timeline {
 public:
  Timeline() = default;
  ~Timeline() { stop(); }
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Opens `path` for writing; AbiError(DTRAIN_ERR_INVALID_ARGUMENT) naming the path when that
  // fails or a timeline is already being written.
  void start(const std::string& path);
  // Closes the JSON and the file; nothing when not started. Never throws.
  void stop() noexcept;
  bool active() const { return active_.load(std::memory_order_relaxed); }

  // Phases of the operation `name`, no-ops while inactive. `args`: a JSON object or "".
  void begin(const std::string& name, const std::string& phase, const std::string& args = "");
  void end(const std::string& name);  // closes the innermost open phase of `name`, if any
  void instant(const std::string& name, const std::string& what, const std::string& args = "");

 private:
  int track(const std::string& name);   // under mutex_
  void emit(const std::string& event);  // under mutex_
  double now_us() const;

  std::atomic<bool> active_{false};
  std::mutex mutex_;
  std::FILE* file_ = nullptr;
  std::string path_;
  double zero_ = 0;
  bool first_ = true;
  struct Track {
    int tid = 0;
    int open = 0;  // begin events without their end yet
  };
  std::map<std::string, Track> tracks_;
};

// "ALLREDUCE" for allreduce, ...: the phase names of kinds.
std::string upper(const char* text);

}  // namespace dtrain::library
