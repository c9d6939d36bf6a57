#include "comm/collective.h"

#include <sstream>

namespace dtrain::comm {

const char* reduce_op_name(ReduceOp op) {
  return op == ReduceOp::kSum ? "sum" : "avg";
}

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kBarrier: return "barrier";
  }
  return "unknown";
}

std::string describe(const Collective& c) {
  std::ostringstream out;
  out << collective_name(c.kind);
  if (c.kind == CollectiveKind::kBarrier) return out.str();
  out << "(count=" << c.count << ", " << runtime::dtype_name(c.dtype);
  if (c.kind == CollectiveKind::kAllReduce || c.kind == CollectiveKind::kReduceScatter) {
    out << ", " << reduce_op_name(c.op);
  }
  if (c.kind == CollectiveKind::kBroadcast) out << ", root=" << c.root;
  out << (c.where.device ? ", device" : ", host") << ")";
  return out.str();
}

bool is_supported_dtype(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

}  // namespace dtrain::comm
