#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "runtime/base/error.h"
#include "runtime/memory/buffer.h"
#include "runtime/memory/tensor.h"

namespace dtrain::runtime {
namespace {

TEST(Buffer, HostMemoryIsAlignedWritableAndMovable) {
  for (size_t bytes : {size_t{1}, size_t{63}, size_t{64}, size_t{1000003}}) {
    Buffer buffer(MemoryKind::kHost, bytes);
    ASSERT_NE(buffer.data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.data()) % 64, 0u);
    std::memset(buffer.data(), 0xab, bytes);
    Buffer moved = std::move(buffer);
    EXPECT_EQ(buffer.data(), nullptr);
    EXPECT_EQ(moved.bytes(), bytes);
    EXPECT_EQ(static_cast<unsigned char*>(moved.data())[bytes - 1], 0xab);
  }
}

TEST(Buffer, ZeroBytesHoldsNothing) {
  Buffer buffer(MemoryKind::kHost, 0);
  EXPECT_EQ(buffer.data(), nullptr);
  EXPECT_EQ(buffer.bytes(), 0u);
}

TEST(Buffer, PinnedHostIsUsableWithOrWithoutAGpu) {
  Buffer buffer(MemoryKind::kPinnedHost, 4096);
  ASSERT_NE(buffer.data(), nullptr);
  std::memset(buffer.data(), 1, 4096);
  EXPECT_EQ(buffer.kind(), MemoryKind::kPinnedHost);
}

TEST(Tensor, ShapeNumelBytesAndTypedAccess) {
  Tensor t(DType::kBF16, {2, 3, 5});
  EXPECT_EQ(t.numel(), 30);
  EXPECT_EQ(t.bytes(), 60u);
  EXPECT_EQ(shape_string(t.shape()), "[2, 3, 5]");
  bfloat16* data = t.data<bfloat16>();
  data[29] = to_bfloat16(1.5f);
  EXPECT_EQ(to_float(t.data<bfloat16>()[29]), 1.5f);
  EXPECT_THROW(t.data<float>(), Error);
}

TEST(Tensor, RejectsNegativeAndOverflowingShapes) {
  EXPECT_THROW(shape_numel({2, -1}), Error);
  EXPECT_THROW(shape_numel({int64_t{1} << 40, int64_t{1} << 40}), Error);
  EXPECT_EQ(shape_numel({}), 1);
  EXPECT_EQ(shape_numel({7, 0}), 0);
}

}  // namespace
}  // namespace dtrain::runtime
