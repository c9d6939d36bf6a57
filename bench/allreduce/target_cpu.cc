// Device pieces of the benchmark in builds without CUDA.
#include "bench/allreduce/target.h"
#include "runtime/base/error.h"

namespace dtrain::bench {

std::unique_ptr<AllReduceTarget> make_raw_nccl_target(const runtime::RankContext&) {
  DTRAIN_USAGE_FAIL() << "--backend raw-nccl needs a CUDA build of dtrain";
}
void* make_bench_stream() {
  return nullptr;
}
void synchronize_stream(void*) {}
void* device_alloc(size_t) {
  DTRAIN_USAGE_FAIL() << "device buffers need a CUDA build of dtrain";
}
void device_free(void*) {}
void copy_to_device(void*, const void*, size_t) {}
void copy_to_host(void*, const void*, size_t) {}

}  // namespace dtrain::bench
