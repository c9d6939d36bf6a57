#include "runtime/memory/buffer.h"

#include <cstdlib>
#include <utility>

#include "runtime/base/error.h"

namespace dtrain::runtime {
namespace {
constexpr size_t kHostAlignment = 64;
}

Buffer::Buffer(MemoryKind kind, size_t bytes, void* stream) : bytes_(bytes), kind_(kind) {
  if (bytes == 0) return;
  if (kind == MemoryKind::kDevice) {
    data_ = detail::allocate_device(bytes, stream, &device_);
    return;
  }
  if (kind == MemoryKind::kPinnedHost) {
    data_ = detail::allocate_page_locked(bytes);
    page_locked_ = data_ != nullptr;
    if (page_locked_) return;
  }
  const size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  data_ = std::aligned_alloc(kHostAlignment, rounded);
  DTRAIN_CHECK(data_ != nullptr) << "out of host memory allocating " << bytes << " bytes";
}

Buffer::~Buffer() {
  release();
}

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      kind_(other.kind_),
      device_(other.device_),
      page_locked_(other.page_locked_) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    kind_ = other.kind_;
    device_ = other.device_;
    page_locked_ = other.page_locked_;
  }
  return *this;
}

void Buffer::release() noexcept {
  if (data_ == nullptr) return;
  if (kind_ == MemoryKind::kDevice) {
    detail::free_device(data_, device_);
  } else if (page_locked_) {
    detail::free_page_locked(data_);
  } else {
    std::free(data_);
  }
  data_ = nullptr;
}

}  // namespace dtrain::runtime
