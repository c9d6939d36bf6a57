#include "train/data/cuda/nvjpeg_library.h"

#include <dlfcn.h>

#include <mutex>
#include <type_traits>
#include <utility>

namespace dtrain::train::cuda::nvjpeg {
namespace {

// The CUDA 13 library: the system's search path first (LD_LIBRARY_PATH, ldconfig), then the
// toolkit's usual home.
constexpr const char* kCandidates[] = {"libnvjpeg.so.13", "/usr/local/cuda/lib64/libnvjpeg.so.13"};

// Looks each {symbol name, function pointer to set} up in `so`, in order; returns the names not
// found, comma-separated (empty when every one was).
template <typename... F>
std::string resolve(void* so, std::pair<const char*, F*>... symbols) {
  std::string missing;
  auto one = [&](const char* name, auto* out) {
    *out = reinterpret_cast<std::remove_pointer_t<decltype(out)>>(dlsym(so, name));
    if (*out == nullptr) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  (one(symbols.first, symbols.second), ...);
  return missing;
}

struct Loaded {
  Library api{};
  std::string why_not;
  bool ok = false;

  Loaded() {
    void* so = nullptr;
    for (const char* name : kCandidates) {
      so = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (so != nullptr) break;
    }
    if (so == nullptr) {
      why_not = "libnvjpeg.so.13 (CUDA 13's nvJPEG) not found on the library path or in /usr/local/cuda/lib64";
      return;
    }
    const std::string missing = resolve(
        so, std::pair{"nvjpegCreateEx", &api.create_ex}, std::pair{"nvjpegDestroy", &api.destroy},
        std::pair{"nvjpegGetHardwareDecoderInfo", &api.hardware_decoder_info},
        std::pair{"nvjpegJpegStateCreate", &api.state_create}, std::pair{"nvjpegJpegStateDestroy", &api.state_destroy},
        std::pair{"nvjpegJpegStreamCreate", &api.stream_create},
        std::pair{"nvjpegJpegStreamDestroy", &api.stream_destroy},
        std::pair{"nvjpegJpegStreamParseHeader", &api.stream_parse_header},
        std::pair{"nvjpegJpegStreamGetFrameDimensions", &api.stream_frame_dimensions},
        std::pair{"nvjpegDecodeBatchedSupported", &api.batched_supported},
        std::pair{"nvjpegDecodeBatchedInitialize", &api.batched_initialize},
        std::pair{"nvjpegDecodeBatched", &api.batched_decode});
    if (!missing.empty()) {
      why_not = "libnvjpeg lacks " + missing;
      return;  // the library stays loaded: harmless, and unloading it is not worth the care
    }
    ok = true;
  }
};

}  // namespace

const Library* library(std::string* why_not) {
  static Loaded loaded;  // thread-safe initialisation
  if (!loaded.ok && why_not != nullptr) *why_not = loaded.why_not;
  return loaded.ok ? &loaded.api : nullptr;
}

const char* status_name(Status status) {
  static const char* const kNames[] = {"NVJPEG_STATUS_SUCCESS",
                                       "NVJPEG_STATUS_NOT_INITIALIZED",
                                       "NVJPEG_STATUS_INVALID_PARAMETER",
                                       "NVJPEG_STATUS_BAD_JPEG",
                                       "NVJPEG_STATUS_JPEG_NOT_SUPPORTED",
                                       "NVJPEG_STATUS_ALLOCATOR_FAILURE",
                                       "NVJPEG_STATUS_EXECUTION_FAILED",
                                       "NVJPEG_STATUS_ARCH_MISMATCH",
                                       "NVJPEG_STATUS_INTERNAL_ERROR",
                                       "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED",
                                       "NVJPEG_STATUS_INCOMPLETE_BITSTREAM"};
  return status >= 0 && status < static_cast<int>(std::size(kNames)) ? kNames[status] : "unknown nvJPEG status";
}

}  // namespace dtrain::train::cuda::nvjpeg
