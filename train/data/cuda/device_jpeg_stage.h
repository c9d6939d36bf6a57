#pragma once
// The GPU's share of the input pipeline under jpeg_decoder gpu: the deferred images of a batch
// (data/deferred_jpeg.h) decoded by nvJPEG's hardware decoder, the JPEG engines beside the SMs
// (H100 and H200 have seven), then cropped, resized and flipped into the batch's device slot by
// crop_resize_images, queued on the input copy stream after the batch's own copy, so the compute
// stream sees a complete batch.
//
// The price: nvJPEG 13's decode calls (batched hardware, single-image, and the CUDA backend alike)
// return only once every stream of the device has finished the work queued before them (measured
// on an H200 with ~70 ms of kernels queued on another stream: the call took 70 ms; idle, 12 ms
// for 253 images). So the host cannot queue steps ahead while a batch decodes, and the GPU waits
// for each decode: ResNet-50 bf16 b256 ran at ~5,900 img/s instead of ~7,600 on an H200, whatever
// the loader threads. That is still 2.3x what 4 loader threads decode; with 14, the host is
// faster. Decoding from a second CUDA context of the same process waits just the same (measured:
// 75 ms behind 70 ms of the primary context's kernels); another process under MPS is untried.
//
// An image the hardware decoder does not take (nvJPEG's own check, per file), or every image of a
// batch it fails on (a corrupt file the loader could not see), is decoded on the host after all
// (decode_on_host), on the training thread: the same crop, flip and bad-file handling, then copied
// into its place, with its label (a bad file's substitute may carry another). Counted in
// counts(). A corrupt file nvJPEG decodes without an error is trained on (deferred_jpeg.h).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda/stream.h"
#include "runtime/memory/buffer.h"
#include "train/data/cuda/crop_resize_images.h"
#include "train/data/cuda/nvjpeg_library.h"
#include "train/data/data_loader.h"

namespace dtrain::train::cuda {

struct JpegStageCounts {
  long on_device = 0;              // decoded by the hardware decoder
  long on_host = 0;                // deferred, then decoded on the host
  long failed_device_batches = 0;  // batches the hardware decoder refused as a whole
};

class DeviceJpegStage {
 public:
  // On the current device; nullptr with the reason when it or this installation has no hardware
  // JPEG decoder. `slots`: how many batches may be in flight on the stream at once (each keeps its
  // own host staging until its copies are done).
  static std::unique_ptr<DeviceJpegStage> open(int slots, std::string* why_not);
  ~DeviceJpegStage();
  DeviceJpegStage(const DeviceJpegStage&) = delete;
  DeviceJpegStage& operator=(const DeviceJpegStage&) = delete;

  // Queues on `stream` the pending images of `batch` into `images` (the batch's device copy, NHWC
  // uint8 of out_height x out_width x 3 per image), and the labels of host-decoded ones into
  // `labels`. Host work first: nvJPEG parses every file (and may wait for the decoder).
  void stage(const Batch& batch, int out_height, int out_width, uint8_t* images, int32_t* labels, cudaStream_t stream,
             int slot);

  JpegStageCounts counts() const { return counts_; }
  // "7 hardware JPEG engines", for the engine's description.
  std::string describe() const;

 private:
  DeviceJpegStage(const nvjpeg::Library& api, int slots);
  // Host staging of one slot: host-decoded images and their labels, and the resize jobs.
  struct Staging {
    runtime::Buffer pixels, labels, jobs, device_jobs, taps;
    runtime::CudaEvent copied;  // after the slot's last copy from this staging
  };
  // Positions that go to the host: not deferred ones the decoder does not take.
  void split(const Batch& batch, std::vector<int>* device, std::vector<int>* host);
  bool decode_on_device(const Batch& batch, const std::vector<int>& positions, int out_height, int out_width,
                        uint8_t* images, cudaStream_t stream, Staging& staging);
  void decode_on_host_into(const Batch& batch, const std::vector<int>& positions, size_t image_bytes, uint8_t* images,
                           int32_t* labels, cudaStream_t stream, Staging& staging);

  const nvjpeg::Library& api_;
  nvjpeg::Handle handle_ = nullptr;
  nvjpeg::State state_ = nullptr;
  nvjpeg::Stream parsed_ = nullptr;
  unsigned engines_ = 0, cores_per_engine_ = 0;
  std::vector<Staging> staging_;
  // The full decoded images of a batch, on the device: two buffers taken in turn, each free again
  // when the resize that read it is done.
  runtime::Buffer decoded_[2];
  runtime::CudaEvent decoded_free_[2];
  int decoded_turn_ = 0;
  int initialized_batch_ = -1;
  std::vector<const unsigned char*> data_;
  std::vector<size_t> lengths_;
  std::vector<nvjpeg::Image> destinations_;
  JpegStageCounts counts_;
};

}  // namespace dtrain::train::cuda
