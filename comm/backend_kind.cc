#include "comm/backend_kind.h"

#include "runtime/base/error.h"

namespace dtrain::comm {

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::kAuto: return "auto";
    case Backend::kMpiRing: return "mpi-ring";
    case Backend::kMpi: return "mpi";
    case Backend::kNccl: return "nccl";
    case Backend::kHierarchical: return "hierarchical";
  }
  return "unknown";
}

Backend parse_backend(std::string_view text, std::string_view source) {
  for (Backend b : {Backend::kAuto, Backend::kMpiRing, Backend::kMpi, Backend::kNccl, Backend::kHierarchical}) {
    if (text == backend_name(b)) return b;
  }
  DTRAIN_USAGE_FAIL() << source << "='" << text << "' is not a backend (use auto, mpi-ring, mpi, nccl or hierarchical)";
}

const char* sixteen_bit_sum_name(SixteenBitSum sum) {
  return sum == SixteenBitSum::kNative ? "native" : "fp32";
}

SixteenBitSum parse_sixteen_bit_sum(std::string_view text, std::string_view source) {
  for (SixteenBitSum s : {SixteenBitSum::kFp32, SixteenBitSum::kNative}) {
    if (text == sixteen_bit_sum_name(s)) return s;
  }
  DTRAIN_USAGE_FAIL() << source << "='" << text << "': 16-bit sums are fp32 (widened, one rounding) or native";
}

}  // namespace dtrain::comm
