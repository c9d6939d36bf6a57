#include "train/data/image_folder_dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/io/fingerprint.h"
#include "train/data/crop_geometry.h"
#include "train/data/image_resize.h"
#include "train/data/jpeg_decoder.h"

namespace dtrain::train {
namespace fs = std::filesystem;
namespace {

bool named_as_jpeg(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".jpeg" || ext == ".jpg";
}

std::vector<fs::directory_entry> sorted_entries(const fs::path& dir) {
  std::vector<fs::directory_entry> entries;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(*it);
  DTRAIN_USAGE_CHECK(!ec) << "cannot list " << dir.string() << ": " << ec.message();
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.path() < b.path(); });
  return entries;
}

// The whole file into `bytes` (reused across calls: no allocation once warm); refuses files over
// `max_bytes` before reading them.
bool read_file(const std::string& path, int64_t max_bytes, std::vector<uint8_t>* bytes, std::string* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = std::string("cannot open the file: ") + std::strerror(errno);
    return false;
  }
  struct stat info {};
  bool ok = ::fstat(fd, &info) == 0;
  if (!ok) {
    *error = std::string("cannot stat the file: ") + std::strerror(errno);
  } else if (info.st_size > max_bytes) {
    *error = "file of " + std::to_string(info.st_size) + " bytes is over the cap of " + std::to_string(max_bytes) +
             " bytes (max_file_mib)";
    ok = false;
  } else {
    bytes->resize(static_cast<size_t>(info.st_size));
    size_t done = 0;
    while (ok && done < bytes->size()) {
      const ssize_t got = ::read(fd, bytes->data() + done, bytes->size() - done);
      if (got > 0) {
        done += static_cast<size_t>(got);
      } else if (got == 0 || errno != EINTR) {
        *error = got == 0 ? std::string("the file shrank while being read")
                          : "read error: " + std::string(std::strerror(errno));
        ok = false;
      }
    }
  }
  ::close(fd);
  return ok;
}

// A truncated file usually still has a readable header; the host decoder notices the missing end
// (a libjpeg-turbo warning), the hardware decoder may not, so such files stay on the host.
bool ends_with_end_of_image(const std::vector<uint8_t>& bytes) {
  return bytes.size() >= 4 && bytes[bytes.size() - 2] == 0xFF && bytes[bytes.size() - 1] == 0xD9;
}

}  // namespace

ImageFolderDataset::ImageFolderDataset(const std::string& split_dir, ImageFolderOptions options)
    : dir_(split_dir), options_(options) {
  DTRAIN_USAGE_CHECK(options.crop > 0 && options.resize >= options.crop)
      << "image folder " << split_dir << ": crop " << options.crop << " and resize " << options.resize
      << " must be positive with resize >= crop";
  std::error_code split_ec;
  DTRAIN_USAGE_CHECK(fs::is_directory(split_dir, split_ec))
      << "dataset directory " << split_dir << " does not exist or is not a directory (expected <wnid>/*.JPEG inside)"
      << (split_ec ? ": " + split_ec.message() : std::string());
  auto scan_reject = [&](const std::string& path, const std::string& reason) {
    ++scan_bad_;
    DTRAIN_LOG0(kWarn) << "skipping " << path << ": " << reason;
  };
  listing_fingerprint_ = runtime::kFingerprintStart;
  // Entries are resolved with error codes: a symlink loop or a dangling link is a bad entry, not
  // a filesystem_error that ends the run.
  for (const fs::directory_entry& class_dir : sorted_entries(split_dir)) {
    std::error_code ec;
    const bool is_dir = class_dir.is_directory(ec);
    if (ec) {
      scan_reject(class_dir.path().string(), "cannot resolve: " + ec.message());
      continue;
    }
    if (!is_dir) {
      scan_reject(class_dir.path().string(), "not a class folder");
      continue;
    }
    const auto label = static_cast<int32_t>(classes_.size());
    classes_.push_back(class_dir.path().filename().string());
    size_t images = 0;
    for (const fs::directory_entry& file : sorted_entries(class_dir.path())) {
      const bool is_file = file.is_regular_file(ec);
      if (ec) {
        scan_reject(file.path().string(), "cannot resolve: " + ec.message());
        continue;
      }
      if (!is_file || !named_as_jpeg(file.path())) {
        scan_reject(file.path().string(), "not a JPEG file (by name)");
        continue;
      }
      files_.push_back({file.path().string(), label});
      const std::string entry = classes_.back() + '/' + file.path().filename().string() + '\n';
      listing_fingerprint_ = runtime::fingerprint(entry.data(), entry.size(), listing_fingerprint_);
      ++images;
    }
    if (images == 0) scan_reject(class_dir.path().string(), "empty class folder");
  }
  DTRAIN_USAGE_CHECK(!files_.empty()) << "dataset directory " << split_dir
                                      << " holds no images (expected <wnid>/*.JPEG inside)";
  allowed_bad_ = static_cast<size_t>(std::floor(options.max_bad_fraction * static_cast<double>(entries())));
  DTRAIN_USAGE_CHECK(scan_bad_ <= allowed_bad_)
      << split_dir << ": " << scan_bad_ << " of " << entries() << " entries are bad (listed above), more than "
      << "max_bad_fraction " << options.max_bad_fraction << " allows (" << allowed_bad_ << ")";
  DTRAIN_LOG0(kInfo) << split_dir << ": " << files_.size() << " images in " << classes_.size() << " classes"
                     << (scan_bad_ ? ", " + std::to_string(scan_bad_) + " bad entries skipped" : std::string());
}

void ImageFolderDataset::normalization(float mean[3], float std[3]) const {
  const float m[3] = {0.485f, 0.456f, 0.406f}, s[3] = {0.229f, 0.224f, 0.225f};
  std::copy(m, m + 3, mean);
  std::copy(s, s + 3, std);
}

BadFiles ImageFolderDataset::bad_files() const {
  std::lock_guard<std::mutex> lock(bad_mutex_);
  return {scan_bad_, std::vector<std::string>(decode_bad_.begin(), decode_bad_.end()), allowed_bad_};
}

bool ImageFolderDataset::try_load(size_t index, std::mt19937_64& rng, uint8_t* out, const JpegDeferral* deferral,
                                  std::string* error) const {
  // Per loader thread and reused: no allocation per image once the buffers have grown.
  thread_local std::vector<uint8_t> bytes;
  thread_local DecodedImage image;
  if (!read_file(files_[index].path, options_.max_file_bytes, &bytes, error)) return false;
  JpegHeader header;
  if (!read_jpeg_header(bytes.data(), bytes.size(), &header, error, options_.max_image_pixels)) return false;
  const CropRegion region = options_.train
                                ? random_resized_crop(header.width, header.height, rng)
                                : center_crop_after_resize(header.width, header.height, options_.resize, options_.crop);
  const bool flip = options_.train && std::uniform_int_distribution<int>(0, 1)(rng) == 1;
  if (deferral != nullptr && header.hardware_decodable && ends_with_end_of_image(bytes)) {
    if (uint8_t* room = deferral->arena->reserve(bytes.size())) {
      std::memcpy(room, bytes.data(), bytes.size());
      DeferredJpeg& job = *deferral->job;
      job.pending = true;
      job.bytes = room;
      job.size = bytes.size();
      job.width = header.width;
      job.height = header.height;
      job.region = region;
      job.flip = flip;
      return true;
    }
  }
  if (!decode_jpeg(bytes.data(), bytes.size(), header, region, options_.crop, options_.crop, &image, error)) {
    return false;
  }
  resize_region(window_view(image), region_in_window(region, image), options_.crop, options_.crop, flip, out);
  return true;
}

void ImageFolderDataset::record_bad(const std::string& path, const std::string& reason) const {
  size_t bad = 0;
  {
    std::lock_guard<std::mutex> lock(bad_mutex_);
    if (!decode_bad_.insert(path).second) return;
    bad = scan_bad_ + decode_bad_.size();
  }
  DTRAIN_LOG(kWarn) << "skipping " << path << ": " << reason;
  DTRAIN_USAGE_CHECK(bad <= allowed_bad_)
      << dir_ << ": " << bad << " of " << entries()
      << " entries are bad (each logged above), more than max_bad_fraction " << options_.max_bad_fraction << " allows ("
      << allowed_bad_ << "); the last was " << path << " (" << reason << ")";
}

int32_t ImageFolderDataset::load(size_t index, std::mt19937_64& rng, uint8_t* out) const {
  return load_any(index, rng, out, nullptr);
}

int32_t ImageFolderDataset::load_deferred(size_t index, std::mt19937_64& rng, uint8_t* out,
                                          const JpegDeferral& deferral) const {
  deferral.job->pending = false;
  return load_any(index, rng, out, options_.train ? &deferral : nullptr);
}

int32_t ImageFolderDataset::load_any(size_t index, std::mt19937_64& rng, uint8_t* out,
                                     const JpegDeferral* deferral) const {
  // A bad file is replaced by the next good one in index order: deterministic, and the batch stays full.
  for (size_t tried = 0; tried < files_.size(); ++tried) {
    const size_t i = (index + tried) % files_.size();
    std::string error;
    if (try_load(i, rng, out, deferral, &error)) return files_[i].label;
    record_bad(files_[i].path, error);
  }
  DTRAIN_FAIL() << dir_ << ": no readable image left";
}

}  // namespace dtrain::train
