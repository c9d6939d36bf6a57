#pragma once
// What one rank asks for under one name, and what rank 0 answers: the control plane's messages.
//
// A Request describes a named operation without its buffers, so rank 0 can compare the ranks'
// requests for one name and say what differs. A Response tells every rank what to execute next,
// in the one order all ranks follow: an operation (or several fused all-reduces), an error for a
// name, or the end. Both travel as flat bytes (encode/decode), never as pointers.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtrain::library {

// kJoin: the rank has no more work; until every rank has joined, it stands in for the others'
// all-reduces with zeros (Horovod's join).
enum class OpKind : uint8_t { kAllReduce, kBroadcast, kAllGather, kReduceScatter, kAllToAll, kBarrier, kJoin };
const char* op_kind_name(OpKind kind);

struct Request {
  std::string name;
  OpKind kind = OpKind::kAllReduce;
  uint8_t dtype = 0;   // dtrain_dtype
  uint8_t op = 0;      // dtrain_op
  uint8_t device = 0;  // dtrain_device
  int32_t root = 0;
  int64_t count = 0;          // elements this rank sends (all-gather) or the per-rank block
  int64_t recv_capacity = 0;  // all-gather: elements recv holds
  double prescale = 1;
  double postscale = 1;
};

// "allreduce 'grad/w1' (count 1000, float32, sum)".
std::string describe(const Request& request);

// Empty when every rank's request may run together, else what differs, naming the operation and
// the ranks ("allreduce 'w': count differs: rank 0 has 10, rank 1 has 12"). `by_rank` holds one
// request per rank. All-gather counts may differ; capacities too short are named here.
std::string mismatch(const std::vector<Request>& by_rank);

enum class ResponseType : uint8_t { kRun, kError, kShutdown };

struct Response {
  ResponseType type = ResponseType::kRun;
  std::vector<std::string> names;  // kRun: one operation, or fused all-reduces; kError: one name
  int32_t status = 0;              // kError: the dtrain_status every rank reports
  std::string error;               // kError: the text
  std::vector<int64_t> counts;     // kRun of an all-gather: each rank's count; of a join: the last rank
  std::vector<Request> stand_ins;  // kRun: all-reduces some ranks did not submit, having joined
};

// Flat bytes: what each rank sends rank 0 every cycle, and what rank 0 sends back.
std::vector<char> encode_requests(const std::vector<Request>& requests, bool shutdown);
// Throws on malformed input (a bug: both ends are this library).
std::vector<Request> decode_requests(const char* data, size_t size, bool* shutdown);
std::vector<char> encode_responses(const std::vector<Response>& responses);
std::vector<Response> decode_responses(const char* data, size_t size);

}  // namespace dtrain::library
