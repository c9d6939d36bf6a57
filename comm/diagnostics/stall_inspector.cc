#include "comm/diagnostics/stall_inspector.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>

#include "runtime/base/env.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/base/process_identity.h"
#include "runtime/mpi/main_guard.h"
#include "runtime/mpi/mpi_check.h"

namespace dtrain::comm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kNever = std::numeric_limits<double>::infinity();
constexpr double kMaxSeconds = 1e6;
constexpr auto kRound = std::chrono::milliseconds(100);
// Tags of the inspector's messages, on the channel's own communicator.
constexpr int kQueryTag = 0x57a1;
constexpr int kReplyTag = 0x57a2;
constexpr int kHostChars = 64;

std::mutex g_settings_mutex;
std::optional<StallSettings> g_settings;

std::optional<double> env_seconds(const char* name) {
  const std::optional<std::string> text = runtime::env_string(name);
  if (!text) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text->c_str(), &end);
  DTRAIN_USAGE_CHECK(end != text->c_str() && *end == '\0' && std::isfinite(value) && value >= 0 && value <= kMaxSeconds)
      << name << "='" << *text << "' must be a number of seconds in [0, 1000000] (0: off)";
  return value;
}

double seconds_since(Clock::time_point start, Clock::time_point now) {
  return std::chrono::duration<double>(now - start).count();
}

// "0-3", "0,4,8", or the first few and a count for large groups.
std::string format_ranks(const std::vector<int>& ranks) {
  std::ostringstream out;
  size_t shown = 0;
  for (size_t i = 0; i < ranks.size(); ++shown) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (shown == 8) {
      out << ",... (" << ranks.size() << " ranks)";
      break;
    }
    out << (shown ? "," : "") << ranks[i];
    if (j > i) out << "-" << ranks[j];
    i = j + 1;
  }
  return out.str();
}

}  // namespace

StallSettings stall_settings_from_env() {
  StallSettings s;
  if (auto w = env_seconds("DTRAIN_STALL_WARNING_SECONDS")) s.warning_seconds = *w;
  if (auto a = env_seconds("DTRAIN_STALL_ABORT_SECONDS")) s.abort_seconds = *a;
  return s;
}

void validate_stall_settings(const StallSettings& s, const std::string& source) {
  DTRAIN_USAGE_CHECK(std::isfinite(s.warning_seconds) && s.warning_seconds >= 0 && s.warning_seconds <= kMaxSeconds)
      << source << ": stall_warning_seconds " << s.warning_seconds << " must be in [0, 1000000] (0: off)";
  DTRAIN_USAGE_CHECK(std::isfinite(s.abort_seconds) && s.abort_seconds >= 0 && s.abort_seconds <= kMaxSeconds)
      << source << ": stall_abort_seconds " << s.abort_seconds << " must be in [0, 1000000] (0: off)";
}

void set_stall_settings(const StallSettings& settings) {
  validate_stall_settings(settings, "stall settings");
  std::lock_guard lock(g_settings_mutex);
  g_settings = settings;
}

StallSettings stall_settings() {
  std::lock_guard lock(g_settings_mutex);
  if (!g_settings) g_settings = stall_settings_from_env();
  return *g_settings;
}

struct StallChannel::Inspection {
  struct Send {
    MPI_Request request = MPI_REQUEST_NULL;
    int64_t message[3] = {0, 0, 0};
  };
  struct Answer {
    int64_t begun = -1;  // -1: no answer this round
    int64_t finished = -1;
  };
  bool broken = false;  // an MPI call of the inspector failed: no more queries on this channel
  MPI_Request query_request = MPI_REQUEST_NULL;
  int64_t query[2] = {0, 0};  // {round, operation}
  MPI_Request reply_request = MPI_REQUEST_NULL;
  int64_t reply[3] = {0, 0, 0};  // {round, begun, finished}
  std::deque<std::unique_ptr<Send>> sends;

  uint64_t op = 0;     // the operation being watched (0: none)
  int reports = 0;     // warnings logged for it
  bool asked = false;  // queries sent for the next report
  Clock::time_point asked_at;
  int64_t round = 0;
  std::vector<Answer> answers;  // by channel rank
};

// The process's one watchdog thread, running while any channel exists.
class StallWatchdog {
 public:
  static StallWatchdog& instance() {
    static StallWatchdog* watchdog = new StallWatchdog;  // never destroyed: no thread at exit
    return *watchdog;
  }

  void add(StallChannel* channel) {
    std::lock_guard lock(mutex_);
    channels_.push_back(channel);
    if (!thread_.joinable()) {
      const uint64_t generation = ++generation_;
      thread_ = std::thread([this, generation] { run(generation); });
    }
  }

  void remove(StallChannel* channel) {
    std::thread finished;
    {
      std::lock_guard lock(mutex_);
      channels_.erase(std::remove(channels_.begin(), channels_.end(), channel), channels_.end());
      if (channels_.empty() && thread_.joinable()) {
        ++generation_;  // tells the running thread to end
        finished = std::move(thread_);
      }
    }
    wake_.notify_all();
    if (finished.joinable()) finished.join();
  }

  void set_poll(StallChannel* channel, const char* backend, std::function<std::string()> poll) {
    std::lock_guard lock(mutex_);
    channel->poll_backend_ = backend;
    channel->poll_ = std::move(poll);
  }

 private:
  void run(uint64_t generation);
  // One round on one channel; the text of a fatal condition, or nothing.
  std::optional<std::string> inspect(StallChannel& c, const StallSettings& s, Clock::time_point now);
  void serve(StallChannel& c);
  void ask(StallChannel& c, uint64_t op, Clock::time_point now);
  std::string report(StallChannel& c, const char* backend, const std::optional<Collective>& call, uint64_t op,
                     double waited);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<StallChannel*> channels_;
  uint64_t generation_ = 0;
  std::thread thread_;
};

void StallWatchdog::run(uint64_t generation) {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait_for(lock, kRound, [&] { return generation_ != generation; });
    if (generation_ != generation) return;
    const StallSettings settings = stall_settings();
    const Clock::time_point now = Clock::now();
    std::optional<std::string> fatal;
    for (StallChannel* channel : channels_) {
      fatal = inspect(*channel, settings, now);
      if (fatal) break;
    }
    if (!fatal) continue;
    lock.unlock();
    runtime::write_log_line(runtime::LogLevel::kError, *fatal);
    // As main_guard's end_job: give the launcher a moment to forward the line before the abort.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    MPI_Abort(MPI_COMM_WORLD, runtime::kExitFailure);
    std::_Exit(runtime::kExitFailure);
  }
}

std::optional<std::string> StallWatchdog::inspect(StallChannel& c, const StallSettings& s, Clock::time_point now) {
  if (c.poll_) {
    const std::string error = c.poll_();
    if (!error.empty()) {
      return std::string("asynchronous ") + c.poll_backend_ + " error on a communicator of " + std::to_string(c.size_) +
             " ranks (world ranks " + format_ranks(c.world_ranks_) + "): " + error + "; ending the job";
    }
  }
  StallChannel::Inspection& in = *c.inspection_;
  if (c.comm_.get() != MPI_COMM_NULL && !in.broken) serve(c);

  uint64_t op = 0;
  const char* backend = nullptr;
  std::optional<Collective> call;
  Clock::time_point start;
  {
    std::lock_guard lock(c.current_mutex_);
    op = c.current_op_;
    backend = c.current_backend_;
    if (c.current_is_call_) call = c.current_call_;
    start = c.current_start_;
  }
  if (c.finished_.load(std::memory_order_acquire) >= op) {
    in.op = 0;
    return std::nullopt;
  }
  if (op != in.op) {
    in.op = op;
    in.reports = 0;
    in.asked = false;
  }
  const double waited = seconds_since(start, now);
  const double warn_at = s.warning_seconds > 0 ? s.warning_seconds * (in.reports + 1) : kNever;
  const double abort_at = s.abort_seconds > 0 ? s.abort_seconds : kNever;
  const double event = std::min(warn_at, abort_at);
  if (event == kNever) return std::nullopt;
  // Ask ahead of the report, so the answers are in when it is due.
  const double lead = std::min(1.0, 0.5 * std::min(s.warning_seconds > 0 ? s.warning_seconds : kNever, abort_at));
  if (!in.asked && waited >= event - lead) ask(c, op, now);
  if (waited < event) return std::nullopt;
  // Asked late (this thread was held up): give the others the usual time to answer, unless all have.
  const bool all_answered =
      std::all_of(in.answers.begin(), in.answers.end(), [](const auto& a) { return a.begun >= 0; });
  if (in.asked && !all_answered && seconds_since(in.asked_at, now) < lead) return std::nullopt;
  std::string text = report(c, backend, call, op, waited);
  if (event == abort_at) {
    std::ostringstream out;
    out << text << "; aborting the job (stall_abort_seconds " << s.abort_seconds << ")";
    return out.str();
  }
  runtime::write_log_line(runtime::LogLevel::kWarn, text);
  ++in.reports;
  in.asked = false;
  return std::nullopt;
}

void StallWatchdog::serve(StallChannel& c) {
  StallChannel::Inspection& in = *c.inspection_;
  const MPI_Comm comm = c.comm_.get();
  auto fail = [&] { in.broken = true; };
  for (;;) {
    int done = 0;
    MPI_Status status;
    if (MPI_Test(&in.query_request, &done, &status) != MPI_SUCCESS) return fail();
    if (!done) break;
    auto send = std::make_unique<StallChannel::Inspection::Send>();
    {
      std::lock_guard lock(c.current_mutex_);
      send->message[1] = static_cast<int64_t>(c.current_op_);
    }
    send->message[0] = in.query[0];
    send->message[2] = static_cast<int64_t>(c.finished_.load(std::memory_order_acquire));
    if (MPI_Isend(send->message, 3, MPI_INT64_T, status.MPI_SOURCE, kReplyTag, comm, &send->request) != MPI_SUCCESS) {
      return fail();
    }
    in.sends.push_back(std::move(send));
    if (MPI_Irecv(in.query, 2, MPI_INT64_T, MPI_ANY_SOURCE, kQueryTag, comm, &in.query_request) != MPI_SUCCESS) {
      return fail();
    }
  }
  for (;;) {
    int done = 0;
    MPI_Status status;
    if (MPI_Test(&in.reply_request, &done, &status) != MPI_SUCCESS) return fail();
    if (!done) break;
    const size_t from = static_cast<size_t>(status.MPI_SOURCE);
    if (in.reply[0] == in.round && from < in.answers.size()) in.answers[from] = {in.reply[1], in.reply[2]};
    if (MPI_Irecv(in.reply, 3, MPI_INT64_T, MPI_ANY_SOURCE, kReplyTag, comm, &in.reply_request) != MPI_SUCCESS) {
      return fail();
    }
  }
  while (!in.sends.empty()) {
    int done = 0;
    if (MPI_Test(&in.sends.front()->request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return fail();
    if (!done) break;
    in.sends.pop_front();
  }
}

void StallWatchdog::ask(StallChannel& c, uint64_t op, Clock::time_point now) {
  StallChannel::Inspection& in = *c.inspection_;
  in.asked = true;
  in.asked_at = now;
  ++in.round;
  in.answers.assign(static_cast<size_t>(c.size_), {});
  in.answers[static_cast<size_t>(c.rank_)] = {static_cast<int64_t>(op), 0};
  if (c.comm_.get() == MPI_COMM_NULL || in.broken) return;
  for (int r = 0; r < c.size_; ++r) {
    if (r == c.rank_) continue;
    auto send = std::make_unique<StallChannel::Inspection::Send>();
    send->message[0] = in.round;
    send->message[1] = static_cast<int64_t>(op);
    if (MPI_Isend(send->message, 2, MPI_INT64_T, r, kQueryTag, c.comm_.get(), &send->request) != MPI_SUCCESS) {
      in.broken = true;
      return;
    }
    in.sends.push_back(std::move(send));
  }
}

std::string StallWatchdog::report(StallChannel& c, const char* backend, const std::optional<Collective>& call,
                                  uint64_t op, double waited) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << "stall: " << backend;
  if (call) out << " " << describe(*call);
  out << ", operation " << op << " of a communicator of " << c.size_ << " ranks (world ranks "
      << format_ranks(c.world_ranks_) << "), has waited " << waited << " s on this rank; ";
  const StallChannel::Inspection& in = *c.inspection_;
  if (c.comm_.get() == MPI_COMM_NULL || in.broken) {
    out << "which ranks have not begun it is unknown (the inspector's queries need MPI_THREAD_MULTIPLE)";
    return out.str();
  }
  std::vector<std::string> suspects;
  std::vector<int> suspect_ranks;
  for (int r = 0; r < c.size_; ++r) {
    const StallChannel::Inspection::Answer& a = in.answers[static_cast<size_t>(r)];
    const int world = c.world_ranks_[static_cast<size_t>(r)];
    const std::string& host = c.hosts_[static_cast<size_t>(r)];
    std::ostringstream one;
    if (a.begun < 0) {
      one << "rank " << world << " on " << host << " did not answer (stopped, hung or dead?)";
    } else if (static_cast<uint64_t>(a.begun) < op) {
      one << "rank " << world << " on " << host << " has not begun it (has begun " << a.begun << " operation(s), "
          << (a.finished < a.begun ? "is inside the last)" : "is between operations)");
    } else if (static_cast<uint64_t>(a.finished) >= op) {
      // A rank whose part failed (and went on: a library caller may) sends nothing more for it.
      one << "rank " << world << " on " << host << " has finished it (failed there, or done: what this rank "
          << "still waits for from it is in flight or will not come)";
    } else {
      continue;
    }
    suspects.push_back(one.str());
    suspect_ranks.push_back(world);
  }
  if (suspects.empty()) {
    out << "every rank has begun it: the wait is inside the transfer (a slow rank, a broken link)";
    return out.str();
  }
  out << "waiting for world rank(s) " << format_ranks(suspect_ranks) << ": ";
  for (size_t i = 0; i < suspects.size(); ++i) out << (i ? "; " : "") << suspects[i];
  return out.str();
}

StallChannel::StallChannel(MPI_Comm comm) : inspection_(std::make_unique<Inspection>()) {
  stall_settings();  // a malformed DTRAIN_STALL_* is reported here, on the caller's thread
  DTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  DTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size_));
  world_ranks_.resize(static_cast<size_t>(size_));
  hosts_.assign(static_cast<size_t>(size_), "?");
  {
    MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    DTRAIN_MPI_CHECK(MPI_Comm_group(comm, &group));
    DTRAIN_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    std::vector<int> mine(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) mine[static_cast<size_t>(r)] = r;
    DTRAIN_MPI_CHECK(MPI_Group_translate_ranks(group, size_, mine.data(), world, world_ranks_.data()));
    MPI_Group_free(&group);
    MPI_Group_free(&world);
  }
  int level = MPI_THREAD_SINGLE;
  DTRAIN_MPI_CHECK(MPI_Query_thread(&level));
  if (level == MPI_THREAD_MULTIPLE) {
    comm_ = runtime::MpiComm::duplicate(comm);
    std::vector<char> names(static_cast<size_t>(size_) * kHostChars, '\0');
    char mine[kHostChars] = {};
    std::snprintf(mine, sizeof(mine), "%s", runtime::process_identity().host.c_str());
    DTRAIN_MPI_CHECK(MPI_Allgather(mine, kHostChars, MPI_CHAR, names.data(), kHostChars, MPI_CHAR, comm_.get()));
    for (int r = 0; r < size_; ++r) {
      hosts_[static_cast<size_t>(r)] =
          std::string(names.data() + static_cast<size_t>(r) * kHostChars,
                      strnlen(names.data() + static_cast<size_t>(r) * kHostChars, kHostChars));
    }
    Inspection& in = *inspection_;
    DTRAIN_MPI_CHECK(MPI_Irecv(in.query, 2, MPI_INT64_T, MPI_ANY_SOURCE, kQueryTag, comm_.get(), &in.query_request));
    DTRAIN_MPI_CHECK(MPI_Irecv(in.reply, 3, MPI_INT64_T, MPI_ANY_SOURCE, kReplyTag, comm_.get(), &in.reply_request));
  }
  StallWatchdog::instance().add(this);
}

StallChannel::~StallChannel() {
  StallWatchdog::instance().remove(this);
  if (comm_.get() == MPI_COMM_NULL || !runtime::mpi_is_active()) return;
  Inspection& in = *inspection_;
  for (MPI_Request* request : {&in.query_request, &in.reply_request}) {
    if (*request == MPI_REQUEST_NULL) continue;
    MPI_Cancel(request);
    MPI_Wait(request, MPI_STATUS_IGNORE);
  }
  // Messages to a peer that no longer listens (or is stopped) must not hold this up: MPI finishes
  // them on its own, so their buffers are left to it (a few bytes, after a stall only).
  for (auto& send : in.sends) {
    int done = 0;
    MPI_Test(&send->request, &done, MPI_STATUS_IGNORE);
    if (done) continue;
    MPI_Request_free(&send->request);
    send.release();
  }
}

void StallChannel::set_async_error_poll(const char* backend, std::function<std::string()> poll) {
  StallWatchdog::instance().set_poll(this, backend, std::move(poll));
}

void StallChannel::begin(const char* backend, const Collective* call) {
  std::lock_guard lock(current_mutex_);
  ++current_op_;
  current_backend_ = backend;
  current_is_call_ = call != nullptr;
  if (call != nullptr) current_call_ = *call;
  current_start_ = Clock::now();
}

}  // namespace dtrain::comm
