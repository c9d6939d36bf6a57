#pragma once
// A 64-bit FNV-1a fingerprint of bytes: cheap, deterministic on every platform, and good enough to
// tell whether ranks hold the same data or made the same call. Not a cryptographic hash.
#include <cstddef>
#include <cstdint>

namespace dtrain::core {

inline uint64_t fingerprint(const void* data, size_t bytes) {
  uint64_t hash = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 1099511628211ull;
  return hash;
}

}  // namespace dtrain::core
