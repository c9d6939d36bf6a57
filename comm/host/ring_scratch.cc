#include "comm/host/ring_scratch.h"

namespace dtrain::comm {

float* RingScratch::get(Slot slot, size_t count) {
  Buffer& b = slots_[slot];
  if (b.count < count) b = {memory_.allocate(count), count};
  return b.block.get();
}

}  // namespace dtrain::comm
