#include "comm/host/ring_memory.h"

#include <cstring>

#include "comm/host/host_reduce.h"

namespace dtrain::comm {
namespace {

class HostRingMemory final : public RingMemory {
 public:
  Block allocate(size_t count) override {
    return Block(std::make_unique<float[]>(count).release(), [](float* p) { delete[] p; });
  }
  void add_scaled(float* out, const float* a, const float* b, size_t n, float scale) override {
    comm::add_scaled(out, a, b, n, scale);
  }
  void scale_copy(float* out, const float* in, size_t n, float scale) override { comm::scale_copy(out, in, n, scale); }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (dst != src && bytes > 0) std::memcpy(dst, src, bytes);
  }
  Location where() const override { return Location::host(); }
  void wait() override {}
};

}  // namespace

std::unique_ptr<RingMemory> make_host_ring_memory() {
  return std::make_unique<HostRingMemory>();
}

}  // namespace dtrain::comm
