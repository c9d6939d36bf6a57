#pragma once
// A 64-bit FNV-1a fingerprint of bytes: cheap, deterministic on every platform, and good enough to
// tell whether ranks hold the same data or made the same call. Not a cryptographic hash.
#include <cstddef>
#include <cstdint>

namespace dtrain::runtime {

inline constexpr uint64_t kFingerprintStart = 1469598103934665603ull;

// `hash`: the fingerprint of the bytes before these, to fingerprint a sequence piece by piece.
inline uint64_t fingerprint(const void* data, size_t bytes, uint64_t hash = kFingerprintStart) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 1099511628211ull;
  return hash;
}

}  // namespace dtrain::runtime
