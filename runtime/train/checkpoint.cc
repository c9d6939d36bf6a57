#include "runtime/train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/core/error.h"
#include "runtime/core/log.h"

namespace dtrain::train {
namespace {

namespace fs = std::filesystem;
constexpr char kMagic[8] = {'D', 'T', 'R', 'A', 'I', 'N', 'C', 'K'};

std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0x82F63B78u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}

void write_all(int fd, const void* data, size_t bytes, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    DTRAIN_USAGE_CHECK(n > 0) << "writing checkpoint " << path << ": " << std::strerror(errno);
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

// Steps of ckpt-<step>.dtrain files in `dir`, newest first.
std::vector<std::pair<int64_t, std::string>> checkpoints_in(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  if (!fs::is_directory(dir)) return found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ckpt-", 0) != 0 || entry.path().extension() != ".dtrain") continue;
    try {
      found.emplace_back(std::stoll(name.substr(5)), entry.path().string());
    } catch (...) {
    }
  }
  std::sort(found.rbegin(), found.rend());
  return found;
}

}  // namespace

uint32_t crc32c(const void* data, size_t bytes, uint32_t crc) {
  static const std::array<uint32_t, 256> table = make_table();
  crc = ~crc;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

std::string write_checkpoint(const std::string& dir, proto::CheckpointHeader header, const std::vector<NamedTensor>& tensors,
                             int keep) {
  fs::create_directories(dir);
  header.clear_tensors();
  uint64_t offset = 0;
  for (const NamedTensor& t : tensors) {
    proto::TensorEntry* e = header.add_tensors();
    e->set_name(t.name);
    e->set_count(t.count);
    e->set_offset(offset);
    e->set_crc32c(crc32c(t.data, t.count * sizeof(float)));
    offset += t.count * sizeof(float);
  }
  const std::string head = header.SerializeAsString();
  const std::string path = dir + "/ckpt-" + std::to_string(header.global_step()) + ".dtrain";
  const std::string temp = path + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  DTRAIN_USAGE_CHECK(fd >= 0) << "cannot create checkpoint " << temp << ": " << std::strerror(errno);
  const uint64_t length = head.size();
  write_all(fd, kMagic, sizeof(kMagic), temp);
  write_all(fd, &length, sizeof(length), temp);
  write_all(fd, head.data(), head.size(), temp);
  for (const NamedTensor& t : tensors) write_all(fd, t.data, t.count * sizeof(float), temp);
  DTRAIN_USAGE_CHECK(::fsync(fd) == 0 && ::close(fd) == 0) << "flushing checkpoint " << temp << ": " << std::strerror(errno);
  fs::rename(temp, path);
  if (const int dir_fd = ::open(dir.c_str(), O_RDONLY); dir_fd >= 0) {  // make the rename itself durable
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  const auto all = checkpoints_in(dir);
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < all.size(); ++i) fs::remove(all[i].second);
  return path;
}

void read_checkpoint(const std::string& path, proto::CheckpointHeader* header, const std::vector<NamedTensor>& tensors) {
  std::ifstream in(path, std::ios::binary);
  DTRAIN_USAGE_CHECK(in.good()) << "cannot open checkpoint " << path << ": " << std::strerror(errno);
  char magic[8] = {};
  uint64_t length = 0;
  in.read(magic, sizeof(magic));
  in.read(reinterpret_cast<char*>(&length), sizeof(length));
  DTRAIN_USAGE_CHECK(in.good() && std::memcmp(magic, kMagic, sizeof(kMagic)) == 0)
      << "checkpoint " << path << " is not a dtrain checkpoint (bad magic)";
  DTRAIN_USAGE_CHECK(length < (uint64_t{1} << 30)) << "checkpoint " << path << " has an implausible header length";
  std::string head(length, '\0');
  in.read(head.data(), static_cast<std::streamsize>(length));
  DTRAIN_USAGE_CHECK(in.good() && header->ParseFromString(head)) << "checkpoint " << path << ": truncated or corrupt header";
  for (const NamedTensor& t : tensors) {
    const auto entry = std::find_if(header->tensors().begin(), header->tensors().end(),
                                    [&](const proto::TensorEntry& e) { return e.name() == t.name; });
    DTRAIN_USAGE_CHECK(entry != header->tensors().end()) << "checkpoint " << path << " has no tensor " << t.name;
    DTRAIN_USAGE_CHECK(entry->count() == t.count) << "checkpoint " << path << ": tensor " << t.name << " has "
                                                  << entry->count() << " elements, the model " << t.count;
    in.seekg(static_cast<std::streamoff>(16 + length + entry->offset()));
    in.read(reinterpret_cast<char*>(t.data), static_cast<std::streamsize>(t.count * sizeof(float)));
    DTRAIN_USAGE_CHECK(in.good()) << "checkpoint " << path << " is truncated (tensor " << t.name << ")";
    DTRAIN_USAGE_CHECK(crc32c(t.data, t.count * sizeof(float)) == entry->crc32c())
        << "checkpoint " << path << ": tensor " << t.name << " fails its CRC32C (corrupt file)";
  }
}

std::string resolve_checkpoint(const std::string& spec, const std::string& dir, proto::CheckpointHeader* header,
                               const std::vector<NamedTensor>& tensors) {
  if (spec != "latest") {
    read_checkpoint(spec, header, tensors);
    return spec;
  }
  const auto all = checkpoints_in(dir);
  DTRAIN_USAGE_CHECK(!all.empty()) << "--resume latest: no checkpoint in '" << dir << "'";
  for (const auto& [step, path] : all) {
    try {
      read_checkpoint(path, header, tensors);
      return path;
    } catch (const core::UsageError& e) {
      DTRAIN_LOG(kWarn) << "skipping checkpoint: " << e.detail();
    }
  }
  DTRAIN_USAGE_FAIL() << "--resume latest: none of the " << all.size() << " checkpoints in " << dir << " is valid";
}

}  // namespace dtrain::train
