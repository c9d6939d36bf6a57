// Training JPEGs decoded on the GPU (jpeg_decoder gpu): the device crop-resize against the
// host's resize_region to the byte, on fresh random images, crops and flips; and a deferring
// loader's batches, decoded by nvJPEG's hardware decoder on a realistic tree (grey, CMYK and 4:4:4
// files among them), against the same batches decoded on the host. Skips without a GPU, and
// without a hardware decoder or nvJPEG, saying which.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

#include "runtime/rank/gpu_binding.h"
#include "tests/support/realistic_tree.h"
#include "tests/support/test_seed.h"
#include "train/data/crop_geometry.h"
#include "train/data/data_loader.h"
#include "train/data/image_folder_dataset.h"
#include "train/data/image_resize.h"
#include "train/data/jpeg_decoder.h"
#include "train/data/sharded_sampler.h"

#if DTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/stream.h"
#include "runtime/memory/buffer.h"
#include "train/data/cuda/crop_resize_images.h"
#include "train/data/cuda/device_jpeg_stage.h"
#endif

namespace dtrain::train {
namespace {
namespace fs = std::filesystem;

#if DTRAIN_WITH_CUDA
template <typename T>
T* device_copy(const std::vector<T>& host, runtime::Buffer* buffer) {
  *buffer = runtime::Buffer(runtime::MemoryKind::kDevice, sizeof(T) * host.size());
  DTRAIN_CUDA_CHECK(cudaMemcpy(buffer->data(), host.data(), sizeof(T) * host.size(), cudaMemcpyHostToDevice));
  return static_cast<T*>(buffer->data());
}

TEST(CropResizeImages, GivesTheHostResizeBytes) {
  if (runtime::detail::runtime_visible_gpus().empty()) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
  std::mt19937_64 rng(test::random_seed());
  // Smaller and larger than the output, thin, and one far larger (wide filters).
  const int sizes[][2] = {{37, 29}, {500, 375}, {333, 500}, {224, 224}, {1700, 1100}, {8, 300}};
  const int out = 56;
  std::vector<uint8_t> sources;
  std::vector<cuda::CropResizeJob> jobs;
  std::vector<std::vector<uint8_t>> expected;
  std::vector<size_t> offsets;
  for (int round = 0; round < 4; ++round) {
    for (const auto& size : sizes) {
      const int w = size[0], h = size[1];
      offsets.push_back(sources.size());
      for (int i = 0; i < w * h * 3; ++i) sources.push_back(static_cast<uint8_t>(rng() & 255));
      // Training crops, and a validation one (fractional corners).
      const CropRegion region = round < 3 ? random_resized_crop(w, h, rng) : center_crop_after_resize(w, h, 64, out);
      const bool flip = (rng() & 1) != 0;
      cuda::CropResizeJob job;
      job.width = w, job.height = h, job.pitch = static_cast<long>(w) * 3;
      job.x = region.x, job.y = region.y, job.region_width = region.width, job.region_height = region.height;
      job.flip = flip ? 1 : 0;
      job.position = static_cast<int>(jobs.size());
      jobs.push_back(job);
      expected.emplace_back(static_cast<size_t>(out) * out * 3);
      const ImageView view{sources.data() + offsets.back(), w, h, 3, static_cast<long>(w) * 3, 3};
      resize_region(view, region, out, out, flip, expected.back().data());
    }
  }
  runtime::Buffer device_sources, device_jobs;
  const uint8_t* base = device_copy(sources, &device_sources);
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i].source = base + offsets[i];
  const long tap_floats = cuda::crop_resize_layout(jobs.data(), static_cast<int>(jobs.size()), out, out);
  const cuda::CropResizeJob* job_array = device_copy(jobs, &device_jobs);
  runtime::Buffer taps(runtime::MemoryKind::kDevice, sizeof(float) * static_cast<size_t>(tap_floats));
  runtime::Buffer device_out(runtime::MemoryKind::kDevice, jobs.size() * out * out * 3);
  cuda::crop_resize_images(nullptr, job_array, static_cast<int>(jobs.size()), out, out,
                           static_cast<float*>(taps.data()), static_cast<uint8_t*>(device_out.data()));
  std::vector<uint8_t> got(device_out.bytes());
  DTRAIN_CUDA_CHECK(cudaMemcpy(got.data(), device_out.data(), got.size(), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::vector<uint8_t> image(got.begin() + static_cast<long>(i * out * out * 3),
                                     got.begin() + static_cast<long>((i + 1) * out * out * 3));
    EXPECT_EQ(image, expected[i]) << "image " << i << " (" << jobs[i].width << "x" << jobs[i].height << ", crop "
                                  << jobs[i].x << "," << jobs[i].y << " " << jobs[i].region_width << "x"
                                  << jobs[i].region_height << (jobs[i].flip ? ", flipped" : "") << ")";
  }
}

// A deferred image decoded by libjpeg-turbo at full size, cropped, resized and flipped on the host.
std::vector<uint8_t> full_size_host_decode(const DeferredJpeg& job, int out, bool flip) {
  JpegHeader header;
  std::string error;
  EXPECT_TRUE(read_jpeg_header(job.bytes, job.size, &header, &error)) << error;
  DecodedImage image;
  EXPECT_TRUE(decode_jpeg(job.bytes, job.size, header, job.region, 1 << 20, 1 << 20, &image, &error)) << error;
  EXPECT_EQ(image.scale, 1.0);
  std::vector<uint8_t> pixels(static_cast<size_t>(out) * out * 3);
  resize_region(window_view(image), region_in_window(job.region, image), out, out, flip, pixels.data());
  return pixels;
}

class DeviceJpegDecoding : public testing::Test {
 protected:
  void SetUp() override {
    if (runtime::detail::runtime_visible_gpus().empty()) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
    std::string why_not;
    stage_ = cuda::DeviceJpegStage::open(1, &why_not);
    if (!stage_) GTEST_SKIP() << "no hardware JPEG decoding here: " << why_not;
    root_ = fs::temp_directory_path() / ("dtrain_jpeg_gpu_" + std::to_string(getpid()));
    test::RealisticTreeOptions tree;
    tree.classes = 4, tree.train_per_class = 24, tree.val_per_class = 1, tree.seed = test::random_seed() % 1000;
    tree.threads = 4, tree.progress = false;
    test::write_realistic_tree(root_.string(), tree);
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }
  fs::path root_;
  std::unique_ptr<cuda::DeviceJpegStage> stage_;
};

TEST_F(DeviceJpegDecoding, BatchesMatchTheHostDecodedOnes) {
  const ImageFolderDataset data((root_ / "train").string(), ImageFolderOptions{});
  const ShardedSampler sampler(data.size(), 1, 0, SamplerOptions{7, true, true, true});
  LoaderOptions options{32, 3, 2, 7, false};
  DataLoader host(data, sampler, options);
  options.defer_decoding = true;
  DataLoader deferring(data, sampler, options);
  host.start_epoch(0);
  deferring.start_epoch(0);
  const size_t bytes = data.output_shape().bytes();
  runtime::Buffer images(runtime::MemoryKind::kDevice, bytes * 32),
      labels(runtime::MemoryKind::kDevice, sizeof(int32_t) * 32);
  runtime::CudaStream stream(0);
  long pending = 0;
  double total_difference = 0;
  size_t compared = 0, closer_than_mirrored = 0;
  for (size_t b = 0; b < host.batches_per_epoch(); ++b) {
    const Batch* expected = host.next();
    const Batch* batch = deferring.next();
    ASSERT_TRUE(expected && batch);
    ASSERT_EQ(batch->labels, expected->labels) << "batch " << b;
    pending += batch->pending_images();
    DTRAIN_CUDA_CHECK(
        cudaMemcpyAsync(images.data(), batch->pixels.data(), bytes * 32, cudaMemcpyHostToDevice, stream.get()));
    DTRAIN_CUDA_CHECK(cudaMemcpyAsync(labels.data(), batch->labels.data(), sizeof(int32_t) * 32, cudaMemcpyHostToDevice,
                                      stream.get()));
    stage_->stage(*batch, 224, 224, static_cast<uint8_t*>(images.data()), static_cast<int32_t*>(labels.data()),
                  stream.get(), 0);
    std::vector<uint8_t> got(bytes * 32);
    DTRAIN_CUDA_CHECK(cudaMemcpyAsync(got.data(), images.data(), got.size(), cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();
    const auto* want = static_cast<const uint8_t*>(expected->pixels.data());
    for (int p = 0; p < 32; ++p) {
      const DeferredJpeg& job = batch->deferred[static_cast<size_t>(p)];
      const uint8_t* image = got.data() + p * bytes;
      if (!job.pending) {  // decoded by the loader in both
        EXPECT_TRUE(std::equal(image, image + bytes, want + p * bytes)) << "batch " << b << " image " << p;
        continue;
      }
      // The reference: libjpeg-turbo at full size (as nvJPEG decodes), the job's crop and flip, the
      // host resize. Only the decoders differ (IDCT rounding, chroma upsampling at colour edges: up
      // to ~4 levels on average over an image, under 1 over the batch).
      const std::vector<uint8_t> reference = full_size_host_decode(job, 224, job.flip);
      const std::vector<uint8_t> mirrored = full_size_host_decode(job, 224, !job.flip);
      double difference = 0, mirrored_difference = 0;
      for (size_t i = 0; i < bytes; ++i) {
        difference += std::abs(int(image[i]) - int(reference[i]));
        mirrored_difference += std::abs(int(image[i]) - int(mirrored[i]));
      }
      difference /= static_cast<double>(bytes);
      mirrored_difference /= static_cast<double>(bytes);
      EXPECT_LT(difference, 6.0) << "batch " << b << " image " << p;
      closer_than_mirrored += difference < mirrored_difference;
      total_difference += difference;
      ++compared;
    }
  }
  const cuda::JpegStageCounts counts = stage_->counts();
  std::printf("%ld images deferred; %ld decoded on the GPU, %ld on the host; mean |difference| %.3f\n", pending,
              counts.on_device, counts.on_host, total_difference / static_cast<double>(compared));
  EXPECT_LT(total_difference / static_cast<double>(compared), 1.5);
  // The comparison sees a wrong flip: the mirrored reference is further off.
  EXPECT_GE(closer_than_mirrored, compared * 9 / 10);
  EXPECT_GT(counts.on_device, 48) << "most realistic files are baseline YCbCr";
  EXPECT_EQ(counts.on_device + counts.on_host, pending);
  EXPECT_EQ(counts.failed_device_batches, 0);
}
#endif

}  // namespace
}  // namespace dtrain::train
