#include "library/coordinator.h"

#include <algorithm>
#include <sstream>

#include "comm/diagnostics/stall_inspector.h"
#include "include/dtrain/dtrain.h"
#include "library/element_types.h"
#include "runtime/base/log.h"
#include "runtime/io/json.h"

namespace dtrain::library {

Coordinator::Coordinator(int world_size, int64_t fusion_threshold_bytes, Timeline& timeline)
    : world_size_(world_size),
      fusion_threshold_(fusion_threshold_bytes),
      timeline_(timeline),
      shutdown_(world_size, false),
      joined_(world_size, false) {}

void Coordinator::add(int rank, std::vector<Request> requests, bool shutdown) {
  for (Request& request : requests) add_one(rank, std::move(request));
  if (shutdown) shutdown_[static_cast<size_t>(rank)] = true;
}

void Coordinator::add_one(int rank, Request request) {
  auto [it, fresh] = pending_.try_emplace(request.name);
  Pending& pending = it->second;
  if (fresh) {
    pending.by_rank.resize(static_cast<size_t>(world_size_));
    pending.arrival = arrivals_++;
    pending.first_seen = pending.last_warned = Clock::now();
    timeline_.begin(request.name, "NEGOTIATE_" + upper(op_kind_name(request.kind)));
  }
  if (timeline_.active()) timeline_.instant(request.name, "rank " + std::to_string(rank) + " ready");
  const bool joins = request.kind == OpKind::kJoin;
  pending.by_rank[static_cast<size_t>(rank)] = std::move(request);
  ++pending.submitted;
  if (joins) {
    join(rank);  // settles this name too once every rank has joined
    return;
  }
  if (pending.submitted + absent_joined(pending) == world_size_) settle(it);
}

void Coordinator::settle(std::map<std::string, Pending>::iterator it) {
  Pending& pending = it->second;
  const Request& some =
      *std::find_if(pending.by_rank.begin(), pending.by_rank.end(), [](const Request& r) { return !r.name.empty(); });
  if (pending.submitted < world_size_) {
    if (some.kind != OpKind::kAllReduce || some.device != DTRAIN_HOST) {
      errors_.push_back({ResponseType::kError,
                         {it->first},
                         DTRAIN_ERR_INVALID_ARGUMENT,
                         describe(some) + ": rank(s) " + missing_ranks(pending) +
                             " have joined; while ranks have joined, only all-reduces of host buffers can run",
                         {}});
      pending_.erase(it);
      return;
    }
    stand_ins_[it->first] = some;
    for (Request& r : pending.by_rank)
      if (r.name.empty()) r = some;
  }
  const std::string problem = mismatch(pending.by_rank);
  timeline_.end(it->first);
  if (problem.empty()) {
    timeline_.begin(it->first, "QUEUE");
    ready_.push_back(pending.by_rank[0]);
    // Each rank's count of an all-gather goes out with its response.
    if (ready_.back().kind == OpKind::kAllGather) {
      std::vector<int64_t>& counts = ready_counts_[it->first];
      for (const Request& r : pending.by_rank) counts.push_back(r.count);
    }
    if (ready_.back().kind == OpKind::kJoin) ready_counts_[it->first] = {last_joined_};
  } else {
    timeline_.instant(it->first, "MISMATCH", runtime::JsonObject().text("error", problem).str());
    stand_ins_.erase(it->first);
    errors_.push_back({ResponseType::kError, {it->first}, DTRAIN_ERR_MISMATCH, "mismatched " + problem, {}});
  }
  pending_.erase(it);
}

int Coordinator::absent_joined(const Pending& pending) const {
  int absent = 0;
  for (size_t r = 0; r < pending.by_rank.size(); ++r)
    if (joined_[r] && pending.by_rank[r].name.empty()) ++absent;
  return absent;
}

// A rank joined: names it has not submitted may now be ready. The join itself needs every rank.
void Coordinator::join(int rank) {
  joined_[static_cast<size_t>(rank)] = true;
  last_joined_ = rank;
  std::vector<std::string> ready;
  for (const auto& [name, pending] : pending_) {
    const bool is_join = std::any_of(pending.by_rank.begin(), pending.by_rank.end(),
                                     [](const Request& r) { return r.kind == OpKind::kJoin && !r.name.empty(); });
    const int counted = pending.submitted + (is_join ? 0 : absent_joined(pending));
    if (counted == world_size_) ready.push_back(name);
  }
  for (const std::string& name : ready) settle(pending_.find(name));
  if (std::all_of(joined_.begin(), joined_.end(), [](bool b) { return b; })) joined_.assign(joined_.size(), false);
}

std::vector<Response> Coordinator::take_responses() {
  std::vector<Response> out = std::move(errors_);
  errors_.clear();
  fuse_ready(&out);
  check_stalls(&out);
  if (std::all_of(shutdown_.begin(), shutdown_.end(), [](bool b) { return b; })) {
    for (auto& [name, pending] : pending_) {
      timeline_.end(name);
      out.push_back({ResponseType::kError,
                     {name},
                     DTRAIN_ERR_SHUT_DOWN,
                     "operation '" + name + "' was still waiting for rank(s) " + missing_ranks(pending) +
                         " when the ranks shut down",
                     {}});
    }
    pending_.clear();
    out.push_back({ResponseType::kShutdown, {}, 0, "", {}});
  }
  return out;
}

// Ready all-reduces of one dtype, op, scale and device go out together while their bytes fit the
// threshold; everything else goes alone. Order is kept within each group, which is all that
// matters: every rank executes the responses in the order given.
void Coordinator::fuse_ready(std::vector<Response>* out) {
  std::vector<bool> taken(ready_.size(), false);
  for (size_t i = 0; i < ready_.size(); ++i) {
    if (taken[i]) continue;
    const Request& head = ready_[i];
    Response response{ResponseType::kRun, {head.name}, 0, "", {}};
    taken[i] = true;
    if (head.kind == OpKind::kAllGather || head.kind == OpKind::kJoin) {
      response.counts = std::move(ready_counts_[head.name]);
      ready_counts_.erase(head.name);
    }
    if (head.kind == OpKind::kAllReduce) {
      const int64_t size = static_cast<int64_t>(element_size(head.dtype));
      int64_t bytes = head.count * size;
      for (size_t j = i + 1; j < ready_.size() && bytes < fusion_threshold_; ++j) {
        const Request& r = ready_[j];
        if (taken[j] || r.kind != OpKind::kAllReduce || r.dtype != head.dtype || r.op != head.op ||
            r.device != head.device || r.prescale != head.prescale || r.postscale != head.postscale)
          continue;
        if (bytes + r.count * size > fusion_threshold_) continue;
        bytes += r.count * size;
        response.names.push_back(r.name);
        taken[j] = true;
      }
    }
    for (const std::string& name : response.names) {
      auto stand_in = stand_ins_.find(name);
      if (stand_in == stand_ins_.end()) continue;
      response.stand_ins.push_back(stand_in->second);
      stand_ins_.erase(stand_in);
    }
    out->push_back(std::move(response));
  }
  ready_.clear();
}

std::string Coordinator::missing_ranks(const Pending& pending) const {
  std::ostringstream text;
  for (size_t r = 0; r < pending.by_rank.size(); ++r)
    if (pending.by_rank[r].name.empty()) text << (text.tellp() > 0 ? ", " : "") << r;
  return text.str();
}

void Coordinator::check_stalls(std::vector<Response>* out) {
  const comm::StallSettings settings = comm::stall_settings();
  const auto now = Clock::now();
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& pending = it->second;
    const double waited = std::chrono::duration<double>(now - pending.first_seen).count();
    const bool abort = settings.abort_seconds > 0 && waited >= settings.abort_seconds;
    const bool warn = settings.warning_seconds > 0 &&
                      std::chrono::duration<double>(now - pending.last_warned).count() >= settings.warning_seconds;
    if (!abort && !warn) {  // the common case, once per pending name and cycle: no text built
      ++it;
      continue;
    }
    const Request& some =
        *std::find_if(pending.by_rank.begin(), pending.by_rank.end(), [](const Request& r) { return !r.name.empty(); });
    std::ostringstream report;
    report << describe(some) << " has waited " << static_cast<int64_t>(waited) << " s for rank(s) "
           << missing_ranks(pending) << ", which have not submitted it (" << pending.submitted << " of " << world_size_
           << " ranks have)";
    if (abort) {
      DTRAIN_LOG(kError) << "stall: " << report.str() << "; failing it on every rank (DTRAIN_STALL_ABORT_SECONDS "
                         << settings.abort_seconds << ")";
      timeline_.end(it->first);
      timeline_.instant(it->first, "STALLED", runtime::JsonObject().text("error", report.str()).str());
      out->push_back({ResponseType::kError, {it->first}, DTRAIN_ERR_STALLED, "stalled: " + report.str(), {}});
      it = pending_.erase(it);
      continue;
    }
    DTRAIN_LOG(kWarn) << "stall: " << report.str();
    pending.last_warned = now;
    ++it;
  }
}

}  // namespace dtrain::library
