#include "train/data/cuda/device_jpeg_stage.h"

#include "runtime/base/log.h"
#include "runtime/cuda/cuda_check.h"

namespace dtrain::train::cuda {
namespace {

#define DTRAIN_NVJPEG_CHECK(call)                                                         \
  for (nvjpeg::Status dtrain_nvjpeg_rc_ = (call); dtrain_nvjpeg_rc_ != nvjpeg::kSuccess;) \
  DTRAIN_FAIL() << #call << " failed: " << nvjpeg::status_name(dtrain_nvjpeg_rc_) << ": "

}  // namespace

std::unique_ptr<DeviceJpegStage> DeviceJpegStage::open(int slots, std::string* why_not) {
  const nvjpeg::Library* api = nvjpeg::library(why_not);
  if (api == nullptr) return nullptr;
  nvjpeg::Handle probe = nullptr;
  const nvjpeg::Status status = api->create_ex(nvjpeg::kBackendHardware, nullptr, nullptr, 0, &probe);
  if (status != nvjpeg::kSuccess) {
    *why_not = std::string("nvJPEG has no hardware decoder on this GPU (") + nvjpeg::status_name(status) + ")";
    return nullptr;
  }
  api->destroy(probe);
  return std::unique_ptr<DeviceJpegStage>(new DeviceJpegStage(*api, slots));
}

DeviceJpegStage::DeviceJpegStage(const nvjpeg::Library& api, int slots) : api_(api), staging_(slots) {
  // Chroma is upsampled by replication (nvJPEG's default): NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION
  // gives libjpeg-turbo's full-size pixels exactly, but cost ResNet-50 30% (4,160 img/s against
  // 5,900 on an H200, bench/results/2026-11-25_h200/gpu_decode_3e78c3b); the pixels differ by
  // under one level on average.
  DTRAIN_NVJPEG_CHECK(api_.create_ex(nvjpeg::kBackendHardware, nullptr, nullptr, 0, &handle_)) << "hardware backend";
  DTRAIN_NVJPEG_CHECK(api_.state_create(handle_, &state_)) << "decoder state";
  DTRAIN_NVJPEG_CHECK(api_.stream_create(handle_, &parsed_)) << "stream parser";
  if (api_.hardware_decoder_info(handle_, &engines_, &cores_per_engine_) != nvjpeg::kSuccess) engines_ = 0;
}

DeviceJpegStage::~DeviceJpegStage() {
  // The last batches may still be decoding and copying from the staging.
  for (Staging& s : staging_) s.copied.synchronize();
  for (runtime::CudaEvent& e : decoded_free_) e.synchronize();
  if (parsed_ != nullptr) api_.stream_destroy(parsed_);
  if (state_ != nullptr) api_.state_destroy(state_);
  if (handle_ != nullptr) api_.destroy(handle_);
}

std::string DeviceJpegStage::describe() const {
  return engines_ > 0 ? std::to_string(engines_) + " hardware JPEG engines" : std::string("the hardware JPEG decoder");
}

void DeviceJpegStage::split(const Batch& batch, std::vector<int>* device, std::vector<int>* host) {
  for (int p = 0; p < batch.size && p < static_cast<int>(batch.deferred.size()); ++p) {
    const DeferredJpeg& job = batch.deferred[static_cast<size_t>(p)];
    if (!job.pending) continue;
    int unsupported = 1;
    unsigned width = 0, height = 0;
    const bool parsed = api_.stream_parse_header(handle_, job.bytes, job.size, parsed_) == nvjpeg::kSuccess &&
                        api_.batched_supported(handle_, parsed_, &unsupported) == nvjpeg::kSuccess &&
                        api_.stream_frame_dimensions(parsed_, &width, &height) == nvjpeg::kSuccess;
    const bool same_size = static_cast<int>(width) == job.width && static_cast<int>(height) == job.height;
    (parsed && unsupported == 0 && same_size ? device : host)->push_back(p);
  }
}

void DeviceJpegStage::stage(const Batch& batch, int out_height, int out_width, uint8_t* images, int32_t* labels,
                            cudaStream_t stream, int slot) {
  Staging& staging = staging_.at(static_cast<size_t>(slot));
  std::vector<int> device, host;
  split(batch, &device, &host);
  if (device.empty() && host.empty()) return;
  // This slot's staging was last copied from a few batches ago; the copies are normally done.
  staging.copied.synchronize();
  if (!device.empty() && !decode_on_device(batch, device, out_height, out_width, images, stream, staging)) {
    ++counts_.failed_device_batches;
    host.insert(host.end(), device.begin(), device.end());
  } else {
    counts_.on_device += static_cast<long>(device.size());
  }
  const size_t image_bytes = static_cast<size_t>(out_height) * out_width * 3;
  if (!host.empty()) decode_on_host_into(batch, host, image_bytes, images, labels, stream, staging);
  staging.copied.record(stream);
}

bool DeviceJpegStage::decode_on_device(const Batch& batch, const std::vector<int>& positions, int out_height,
                                       int out_width, uint8_t* images, cudaStream_t stream, Staging& staging) {
  const int n = static_cast<int>(positions.size());
  size_t total = 0;
  for (int p : positions) {
    const DeferredJpeg& job = batch.deferred[static_cast<size_t>(p)];
    total += static_cast<size_t>(job.width) * job.height * 3;
  }
  // The hardware decoder writes its output when called, not in stream order (torchcodec#1634
  // measured it on H100): the resize that read this buffer two batches ago must be done first.
  const int buffer = decoded_turn_;
  decoded_turn_ ^= 1;
  decoded_free_[buffer].synchronize();
  runtime::Buffer& decoded_buffer = decoded_[buffer];
  if (decoded_buffer.bytes() < total)
    decoded_buffer = runtime::Buffer(runtime::MemoryKind::kDevice, total + total / 4, stream);
  const size_t job_bytes = sizeof(CropResizeJob) * static_cast<size_t>(n);
  if (staging.jobs.bytes() < job_bytes) {
    staging.jobs = runtime::Buffer(runtime::MemoryKind::kPinnedHost, job_bytes * 2);
    staging.device_jobs = runtime::Buffer(runtime::MemoryKind::kDevice, job_bytes * 2, stream);
  }
  data_.resize(static_cast<size_t>(n));
  lengths_.resize(static_cast<size_t>(n));
  destinations_.assign(static_cast<size_t>(n), nvjpeg::Image{});
  auto* jobs = static_cast<CropResizeJob*>(staging.jobs.data());
  auto* decoded = static_cast<uint8_t*>(decoded_buffer.data());
  size_t offset = 0;
  for (int i = 0; i < n; ++i) {
    const DeferredJpeg& d = batch.deferred[static_cast<size_t>(positions[static_cast<size_t>(i)])];
    const long pitch = static_cast<long>(d.width) * 3;
    data_[static_cast<size_t>(i)] = d.bytes;
    lengths_[static_cast<size_t>(i)] = d.size;
    destinations_[static_cast<size_t>(i)].channel[0] = decoded + offset;
    destinations_[static_cast<size_t>(i)].pitch[0] = static_cast<size_t>(pitch);
    jobs[i] = CropResizeJob{
        decoded + offset, d.width,        d.height,        pitch,          d.region.x,
        d.region.y,       d.region.width, d.region.height, d.flip ? 1 : 0, positions[static_cast<size_t>(i)]};
    offset += static_cast<size_t>(pitch) * d.height;
  }
  // nvjpegDecodeBatched wants the batch size it was initialized with.
  if (n != initialized_batch_ &&
      api_.batched_initialize(handle_, state_, n, 1, nvjpeg::kOutputRgbInterleaved) != nvjpeg::kSuccess) {
    initialized_batch_ = -1;
    return false;
  }
  initialized_batch_ = n;
  const nvjpeg::Status status =
      api_.batched_decode(handle_, state_, data_.data(), lengths_.data(), destinations_.data(), stream);
  decoded_free_[buffer].record(stream);  // after whatever the call queued, failed or not; again after the resize
  if (status != nvjpeg::kSuccess) {
    DTRAIN_LOG(kWarn) << "the hardware JPEG decoder refused a batch of " << n << " images ("
                      << nvjpeg::status_name(status) << "); decoding them on the host";
    initialized_batch_ = -1;  // a failed batch leaves the state to be reset
    return false;
  }
  const size_t tap_bytes = sizeof(float) * static_cast<size_t>(crop_resize_layout(jobs, n, out_height, out_width));
  if (staging.taps.bytes() < tap_bytes)
    staging.taps = runtime::Buffer(runtime::MemoryKind::kDevice, tap_bytes * 2, stream);
  DTRAIN_CUDA_CHECK(cudaMemcpyAsync(staging.device_jobs.data(), jobs, job_bytes, cudaMemcpyHostToDevice, stream));
  crop_resize_images(stream, static_cast<const CropResizeJob*>(staging.device_jobs.data()), n, out_height, out_width,
                     static_cast<float*>(staging.taps.data()), images);
  decoded_free_[buffer].record(stream);
  return true;
}

void DeviceJpegStage::decode_on_host_into(const Batch& batch, const std::vector<int>& positions, size_t image_bytes,
                                          uint8_t* images, int32_t* labels, cudaStream_t stream, Staging& staging) {
  const size_t batch_images = batch.deferred.size();
  if (staging.pixels.bytes() < image_bytes * batch_images) {
    staging.pixels = runtime::Buffer(runtime::MemoryKind::kPinnedHost, image_bytes * batch_images);
    staging.labels = runtime::Buffer(runtime::MemoryKind::kPinnedHost, sizeof(int32_t) * batch_images);
  }
  auto* pixels = static_cast<uint8_t*>(staging.pixels.data());
  auto* host_labels = static_cast<int32_t*>(staging.labels.data());
  for (int p : positions) {
    const size_t at = static_cast<size_t>(p);
    host_labels[at] = decode_on_host(batch, p, pixels + at * image_bytes);
    DTRAIN_CUDA_CHECK(cudaMemcpyAsync(images + at * image_bytes, pixels + at * image_bytes, image_bytes,
                                      cudaMemcpyHostToDevice, stream));
    DTRAIN_CUDA_CHECK(cudaMemcpyAsync(labels + at, host_labels + at, sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  }
  counts_.on_host += static_cast<long>(positions.size());
}

}  // namespace dtrain::train::cuda
