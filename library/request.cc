#include "library/request.h"

#include <cstring>
#include <sstream>
#include <stdexcept>

#include "library/element_types.h"

namespace dtrain::library {
namespace {

// Appends and reads plain values; both ends are this library on one kind of host.
class Writer {
 public:
  template <typename T>
  void put(T value) {
    const char* bytes = reinterpret_cast<const char*>(&value);
    out_.insert(out_.end(), bytes, bytes + sizeof(T));
  }
  void put_string(const std::string& text) {
    put<uint32_t>(static_cast<uint32_t>(text.size()));
    out_.insert(out_.end(), text.begin(), text.end());
  }
  std::vector<char> take() { return std::move(out_); }

 private:
  std::vector<char> out_;
};

class Reader {
 public:
  Reader(const char* data, size_t size) : data_(data), size_(size) {}
  template <typename T>
  T get() {
    need(sizeof(T));
    T value;
    std::memcpy(&value, data_ + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  std::string get_string() {
    const auto length = get<uint32_t>();
    need(length);
    std::string text(data_ + at_, length);
    at_ += length;
    return text;
  }
  bool done() const { return at_ == size_; }

 private:
  void need(size_t bytes) const {
    if (size_ - at_ < bytes) throw std::runtime_error("dtrain control message truncated");
  }
  const char* data_;
  size_t size_;
  size_t at_ = 0;
};

// One field's values by rank: "rank 0 has 10, rank 1 has 12" (ranks grouped by value).
template <typename Get>
std::string differing(const std::vector<Request>& by_rank, const char* field, Get get) {
  std::ostringstream text;
  text << field << " differs:";
  std::vector<bool> listed(by_rank.size(), false);
  const char* separator = " ";
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (listed[r]) continue;
    std::string group = std::to_string(r);
    bool several = false;
    for (size_t q = r + 1; q < by_rank.size(); ++q) {
      if (get(by_rank[q]) == get(by_rank[r])) {
        group.push_back(',');
        group.append(std::to_string(q));
        listed[q] = true;
        several = true;
      }
    }
    text << separator << (several ? "ranks " : "rank ") << group << " " << get(by_rank[r]);
    separator = "; ";
  }
  return text.str();
}

void put_request(Writer& out, const Request& r) {
  out.put_string(r.name);
  out.put(r.kind);
  out.put(r.dtype);
  out.put(r.op);
  out.put(r.device);
  out.put(r.root);
  out.put(r.count);
  out.put(r.recv_capacity);
  out.put(r.prescale);
  out.put(r.postscale);
}

Request get_request(Reader& in) {
  Request r;
  r.name = in.get_string();
  r.kind = in.get<OpKind>();
  r.dtype = in.get<uint8_t>();
  r.op = in.get<uint8_t>();
  r.device = in.get<uint8_t>();
  r.root = in.get<int32_t>();
  r.count = in.get<int64_t>();
  r.recv_capacity = in.get<int64_t>();
  r.prescale = in.get<double>();
  r.postscale = in.get<double>();
  return r;
}

}  // namespace

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kAllReduce: return "allreduce";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kAllGather: return "allgather";
    case OpKind::kReduceScatter: return "reducescatter";
    case OpKind::kAllToAll: return "alltoall";
    case OpKind::kBarrier: return "barrier";
    case OpKind::kJoin: return "join";
  }
  return "?";
}

std::string describe(const Request& r) {
  std::ostringstream text;
  text << op_kind_name(r.kind) << " '" << r.name << "'";
  if (r.kind == OpKind::kBarrier || r.kind == OpKind::kJoin) return text.str();
  text << " (count " << r.count << ", " << dtype_label(r.dtype);
  if (r.kind == OpKind::kAllReduce || r.kind == OpKind::kReduceScatter) text << ", " << op_label(r.op);
  if (r.kind == OpKind::kBroadcast) text << ", root " << r.root;
  text << ")";
  return text.str();
}

std::string mismatch(const std::vector<Request>& by_rank) {
  const Request& first = by_rank.front();
  const std::string what = std::string(op_kind_name(first.kind)) + " '" + first.name + "': ";
  auto same = [&](auto get) {
    for (const Request& r : by_rank)
      if (get(r) != get(first)) return false;
    return true;
  };
  const auto kind = [](const Request& r) { return std::string(op_kind_name(r.kind)); };
  if (!same(kind)) return "operation '" + first.name + "': " + differing(by_rank, "kind", kind);
  const auto dtype = [](const Request& r) { return std::string(dtype_label(r.dtype)); };
  if (!same(dtype)) return what + differing(by_rank, "dtype", dtype);
  const auto device = [](const Request& r) { return r.device == DTRAIN_HOST ? "host" : "cuda"; };
  if (!same(device)) return what + differing(by_rank, "device", device);
  const auto count = [](const Request& r) { return r.count; };
  if (first.kind != OpKind::kAllGather && first.kind != OpKind::kBarrier && !same(count))
    return what + differing(by_rank, "count", count);
  const auto op = [](const Request& r) { return std::string(op_label(r.op)); };
  if ((first.kind == OpKind::kAllReduce || first.kind == OpKind::kReduceScatter) && !same(op))
    return what + differing(by_rank, "op", op);
  const auto root = [](const Request& r) { return r.root; };
  if (first.kind == OpKind::kBroadcast && !same(root)) return what + differing(by_rank, "root", root);
  const auto scales = [](const Request& r) {
    std::ostringstream s;
    s << r.prescale << "/" << r.postscale;
    return s.str();
  };
  if (first.kind == OpKind::kAllReduce && !same(scales)) return what + differing(by_rank, "prescale/postscale", scales);
  if (first.kind == OpKind::kAllGather) {
    int64_t total = 0;
    for (const Request& r : by_rank) total += r.count;
    std::ostringstream short_ranks;
    for (size_t r = 0; r < by_rank.size(); ++r)
      if (by_rank[r].recv_capacity < total)
        short_ranks << (short_ranks.tellp() > 0 ? ", " : "") << "rank " << r << " has " << by_rank[r].recv_capacity;
    if (short_ranks.tellp() > 0)
      return what + "recv_capacity is below the " + std::to_string(total) + " elements gathered: " + short_ranks.str();
  }
  return "";
}

std::vector<char> encode_requests(const std::vector<Request>& requests, bool shutdown) {
  Writer out;
  out.put<uint8_t>(shutdown ? 1 : 0);
  out.put<uint32_t>(static_cast<uint32_t>(requests.size()));
  for (const Request& r : requests) {
    put_request(out, r);
  }
  return out.take();
}

std::vector<Request> decode_requests(const char* data, size_t size, bool* shutdown) {
  Reader in(data, size);
  *shutdown = in.get<uint8_t>() != 0;
  std::vector<Request> requests(in.get<uint32_t>());
  for (Request& r : requests) {
    r = get_request(in);
  }
  if (!in.done()) throw std::runtime_error("dtrain request message too long");
  return requests;
}

std::vector<char> encode_responses(const std::vector<Response>& responses) {
  Writer out;
  out.put<uint32_t>(static_cast<uint32_t>(responses.size()));
  for (const Response& r : responses) {
    out.put(r.type);
    out.put<uint32_t>(static_cast<uint32_t>(r.names.size()));
    for (const std::string& name : r.names) out.put_string(name);
    out.put(r.status);
    out.put_string(r.error);
    out.put<uint32_t>(static_cast<uint32_t>(r.counts.size()));
    for (int64_t c : r.counts) out.put(c);
    out.put<uint32_t>(static_cast<uint32_t>(r.stand_ins.size()));
    for (const Request& stand_in : r.stand_ins) put_request(out, stand_in);
  }
  return out.take();
}

std::vector<Response> decode_responses(const char* data, size_t size) {
  Reader in(data, size);
  std::vector<Response> responses(in.get<uint32_t>());
  for (Response& r : responses) {
    r.type = in.get<ResponseType>();
    r.names.resize(in.get<uint32_t>());
    for (std::string& name : r.names) name = in.get_string();
    r.status = in.get<int32_t>();
    r.error = in.get_string();
    r.counts.resize(in.get<uint32_t>());
    for (int64_t& c : r.counts) c = in.get<int64_t>();
    r.stand_ins.resize(in.get<uint32_t>());
    for (Request& stand_in : r.stand_ins) stand_in = get_request(in);
  }
  if (!in.done()) throw std::runtime_error("dtrain response message too long");
  return responses;
}

}  // namespace dtrain::library
