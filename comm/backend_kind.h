#pragma once
// The names of the backends and of the two ways a 16-bit sum adds, parsed once from flags and
// configs. Apart from the factory (backends/factory.h) so that a backend can name them without
// including the factory that creates it.
#include <string_view>

namespace dtrain::comm {

enum class Backend { kAuto, kMpiRing, kMpi, kNccl, kHierarchical };

// How a bf16 or fp16 reduction adds:
//   kFp32:   widened to fp32, reduced in fp32, rounded once (comm/host/wide_reduction.h). Every
//            backend. Costs twice the bytes on the wire of a 16-bit sum.
//   kNative: in the buffers' own type, as NCCL reduces 16-bit data natively (and as PyTorch DDP's
//            bf16 compression hook does): one rounding per step of NCCL's ring or tree, so about
//            log2(ranks) to ranks roundings instead of one. The nccl backend only.
enum class SixteenBitSum { kFp32, kNative };
const char* sixteen_bit_sum_name(SixteenBitSum sum);
// "fp32", "native"; UsageError naming `source` otherwise.
SixteenBitSum parse_sixteen_bit_sum(std::string_view text, std::string_view source);

const char* backend_name(Backend backend);
// "auto", "mpi-ring", "mpi", "nccl", "hierarchical"; UsageError naming `source` otherwise.
Backend parse_backend(std::string_view text, std::string_view source);

}  // namespace dtrain::comm
