#pragma once
// nvJPEG, loaded at run time. nvJPEG is part of the CUDA Toolkit, but not of every installation of
// it (the CI machines' CUDA has no nvJPEG, the Debian packages none at all): dtrain builds without
// its header and library and looks for libnvjpeg.so.13 when a run asks for GPU decoding. What
// follows declares the few entry points the GPU engine uses, in our own words, with the values
// of nvJPEG's C API (nvjpeg.h of CUDA 13).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace dtrain::train::cuda::nvjpeg {

using Status = int;
constexpr Status kSuccess = 0;

// nvjpegBackend_t: the hardware decoder (A100, H100, H200 ... baseline files only).
constexpr int kBackendHardware = 3;
// nvjpegOutputFormat_t: interleaved RGB in channel[0].
constexpr int kOutputRgbInterleaved = 5;

using Handle = struct HandleTag*;
using State = struct StateTag*;
using Stream = struct StreamTag*;

// nvjpegImage_t.
struct Image {
  unsigned char* channel[4];
  size_t pitch[4];
};

struct Library {
  // Allocators null: nvJPEG's own (cudaMalloc, cudaHostAlloc).
  Status (*create_ex)(int backend, void* device_allocator, void* pinned_allocator, unsigned flags, Handle* handle);
  Status (*destroy)(Handle handle);
  Status (*hardware_decoder_info)(Handle handle, unsigned* engines, unsigned* cores_per_engine);
  Status (*state_create)(Handle handle, State* state);
  Status (*state_destroy)(State state);
  Status (*stream_create)(Handle handle, Stream* stream);
  Status (*stream_destroy)(Stream stream);
  Status (*stream_parse_header)(Handle handle, const unsigned char* data, size_t length, Stream stream);
  Status (*stream_frame_dimensions)(Stream stream, unsigned* width, unsigned* height);
  // 0 in *supported when the batched (hardware) decoder takes the parsed stream.
  Status (*batched_supported)(Handle handle, Stream stream, int* supported);
  Status (*batched_initialize)(Handle handle, State state, int batch_size, int max_cpu_threads, int output_format);
  Status (*batched_decode)(Handle handle, State state, const unsigned char* const* data, const size_t* lengths,
                           Image* destinations, cudaStream_t stream);
};

// The library, loaded once per process; nullptr with the reason in *why_not when it cannot be
// (not installed, or a version without these entry points).
const Library* library(std::string* why_not);

// "NVJPEG_STATUS_BAD_JPEG" and so on, for messages.
const char* status_name(Status status);

}  // namespace dtrain::train::cuda::nvjpeg
