#include "train/checkpoint/checkpoint.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <tuple>

#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/io/atomic_file.h"
#include "runtime/io/crc32c.h"
#include "train/config/train_config.h"

namespace dtrain::train {
namespace {

namespace fs = std::filesystem;
constexpr char kMagic[8] = {'D', 'T', 'R', 'A', 'I', 'N', 'C', '2'};
constexpr char kLegacyMagic[8] = {'D', 'T', 'R', 'A', 'I', 'N', 'C', 'K'};  // no header checksum
constexpr size_t kRunIdDigits = 16;

bool is_run_id(const std::string& text) {
  return text.size() == kRunIdDigits &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Reads and verifies the header of `path` (magic, length against the file's size before anything is
// allocated, checksum). Returns where the tensor data starts; *data_bytes: how many bytes follow.
uint64_t read_header(std::ifstream& in, const std::string& path, proto::CheckpointHeader* header,
                     uint64_t* data_bytes) {
  DTRAIN_USAGE_CHECK(in.good()) << "cannot open checkpoint " << path << ": " << std::strerror(errno);
  in.seekg(0, std::ios::end);
  const std::streamoff end = in.tellg();
  in.seekg(0);
  DTRAIN_USAGE_CHECK(end >= 0 && in.good()) << "cannot read checkpoint " << path;
  const uint64_t size = static_cast<uint64_t>(end);
  char magic[8] = {};
  uint64_t length = 0;
  in.read(magic, sizeof(magic));
  in.read(reinterpret_cast<char*>(&length), sizeof(length));
  const bool legacy = in.good() && std::memcmp(magic, kLegacyMagic, sizeof(magic)) == 0;
  DTRAIN_USAGE_CHECK(in.good() && (legacy || std::memcmp(magic, kMagic, sizeof(magic)) == 0))
      << "checkpoint " << path << " is not a dtrain checkpoint (bad magic)";
  uint32_t stored_crc = 0;
  if (!legacy) in.read(reinterpret_cast<char*>(&stored_crc), sizeof(stored_crc));
  const uint64_t prefix = legacy ? 16 : 20;
  DTRAIN_USAGE_CHECK(in.good() && length <= size - prefix)
      << "checkpoint " << path << ": header length " << length << " does not fit the file's " << size
      << " bytes (truncated or corrupt)";
  std::string head(length, '\0');
  in.read(head.data(), static_cast<std::streamsize>(length));
  DTRAIN_USAGE_CHECK(in.good()) << "checkpoint " << path << ": truncated header";
  if (!legacy) {
    DTRAIN_USAGE_CHECK(runtime::crc32c(head.data(), head.size(), runtime::crc32c(&length, sizeof(length))) ==
                       stored_crc)
        << "checkpoint " << path << ": header fails its CRC32C (corrupt file)";
  }
  DTRAIN_USAGE_CHECK(header->ParseFromString(head)) << "checkpoint " << path << ": corrupt header";
  *data_bytes = size - prefix - length;
  return prefix + length;
}

// Bytes free to this process on the file system of `dir`; max when it cannot be told.
uint64_t free_bytes(const std::string& dir) {
  struct statvfs fs_info = {};
  if (statvfs(dir.c_str(), &fs_info) != 0) return UINT64_MAX;
  return uint64_t{fs_info.f_bavail} * fs_info.f_frsize;
}

// Rotation ahead of a write the disk has no room for: the run's files the write's rotation would
// delete anyway (beyond the newest keep - 1) go first, oldest first, and never the newest one that
// reads back (the last good checkpoint).
void make_room(const std::string& dir, const std::string& run_id, int keep, uint64_t needed) {
  uint64_t available = free_bytes(dir);
  if (available >= needed) return;
  std::vector<CheckpointFile> mine;
  for (CheckpointFile& f : list_checkpoints(dir)) {
    if (f.run_id == run_id) mine.push_back(std::move(f));
  }
  const auto newest_good =
      std::find_if(mine.begin(), mine.end(), [](const CheckpointFile& f) { return f.written_unix_ns >= 0; });
  const size_t kept = static_cast<size_t>(std::max(keep - 1, 0));
  for (size_t i = mine.size(); i-- > kept && available < needed;) {
    if (newest_good != mine.end() && mine[i].path == newest_good->path) continue;
    std::error_code removing;
    if (!fs::remove(mine[i].path, removing)) continue;
    DTRAIN_LOG(kWarn) << "making room for the next checkpoint (" << needed << " bytes, " << available << " free in "
                      << dir << "): removed the older " << mine[i].path << " before writing";
    available = free_bytes(dir);
  }
}

}  // namespace

std::string new_run_id() {
  std::random_device random;
  const uint64_t id = (uint64_t{random()} << 32) ^ random() ^
                      static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  static const char kHex[] = "0123456789abcdef";
  std::string text(kRunIdDigits, '0');
  for (size_t i = 0; i < kRunIdDigits; ++i) text[i] = kHex[(id >> (4 * (kRunIdDigits - 1 - i))) & 0xF];
  return text;
}

bool parse_checkpoint_name(const std::string& filename, int64_t* step, std::string* run_id) {
  const std::string prefix = "ckpt-", suffix = ".dtrain";
  if (filename.size() <= prefix.size() + suffix.size() || filename.rfind(prefix, 0) != 0 ||
      filename.compare(filename.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  const std::string middle = filename.substr(prefix.size(), filename.size() - prefix.size() - suffix.size());
  const size_t dash = middle.find('-');
  const std::string digits = middle.substr(0, dash);
  const std::string id = dash == std::string::npos ? std::string() : middle.substr(dash + 1);
  if (digits.empty() || digits.size() > 18 || (digits.size() > 1 && digits[0] == '0') ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  if (dash != std::string::npos && !is_run_id(id)) return false;
  *step = std::stoll(digits);
  *run_id = id;
  return true;
}

std::vector<CheckpointFile> list_checkpoints(const std::string& dir) {
  std::vector<CheckpointFile> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    CheckpointFile file;
    if (!it->is_regular_file(ec) || !parse_checkpoint_name(it->path().filename().string(), &file.step, &file.run_id)) {
      continue;
    }
    file.path = it->path().string();
    try {
      std::ifstream in(file.path, std::ios::binary);
      proto::CheckpointHeader header;
      uint64_t data_bytes = 0;
      read_header(in, file.path, &header, &data_bytes);
      file.written_unix_ns = header.written_unix_ns();
    } catch (const runtime::UsageError&) {
      file.written_unix_ns = -1;  // found and named when it is read
    }
    found.push_back(std::move(file));
  }
  std::sort(found.begin(), found.end(), [](const CheckpointFile& a, const CheckpointFile& b) {
    return std::tie(a.written_unix_ns, a.step, a.path) > std::tie(b.written_unix_ns, b.step, b.path);
  });
  return found;
}

std::vector<std::string> remove_stale_temporaries(const std::string& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    int64_t step = 0;
    std::string run_id;
    if (name.size() <= 4 || name.compare(name.size() - 4, 4, ".tmp") != 0 || !it->is_regular_file(ec) ||
        !parse_checkpoint_name(name.substr(0, name.size() - 4), &step, &run_id)) {
      continue;
    }
    std::error_code removing;
    if (fs::remove(it->path(), removing)) removed.push_back(it->path().string());
  }
  return removed;
}

std::string write_checkpoint(const std::string& dir, proto::CheckpointHeader header,
                             const std::vector<NamedTensor>& tensors, int keep) {
  const std::string run_id = header.run_id();
  DTRAIN_CHECK(is_run_id(run_id)) << "checkpoint header without a run id ('" << run_id << "')";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) DTRAIN_FAIL() << "I/O error: cannot create checkpoint directory " << dir << ": " << ec.message();
  header.clear_tensors();
  uint64_t offset = 0;
  for (const NamedTensor& t : tensors) {
    proto::TensorEntry* e = header.add_tensors();
    e->set_name(t.name);
    e->set_count(t.count);
    e->set_offset(offset);
    e->set_crc32c(runtime::crc32c(t.data, t.count * sizeof(float)));
    offset += t.count * sizeof(float);
  }
  header.set_written_unix_ns(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  const std::string head = header.SerializeAsString();
  const uint64_t length = head.size();
  const uint32_t head_crc = runtime::crc32c(head.data(), head.size(), runtime::crc32c(&length, sizeof(length)));
  const std::string path = dir + "/ckpt-" + std::to_string(header.global_step()) + "-" + run_id + ".dtrain";
  make_room(dir, run_id, keep, sizeof(kMagic) + sizeof(length) + sizeof(head_crc) + head.size() + offset);
  {
    runtime::AtomicFile file(path, "checkpoint");
    file.write(kMagic, sizeof(kMagic));
    file.write(&length, sizeof(length));
    file.write(&head_crc, sizeof(head_crc));
    file.write(head.data(), head.size());
    for (const NamedTensor& t : tensors) file.write(t.data, t.count * sizeof(float));
    file.commit();
  }
  // Rotation: this run's files only, newest kept; another run's checkpoints are never touched.
  const fs::path written = fs::path(path).filename();
  int kept = 1;
  for (const CheckpointFile& f : list_checkpoints(dir)) {
    if (f.run_id != run_id || fs::path(f.path).filename() == written || kept++ < std::max(keep, 1)) continue;
    std::error_code removing;
    fs::remove(f.path, removing);
    if (removing) {
      DTRAIN_LOG(kWarn) << "cannot remove old checkpoint " << f.path << ": " << removing.message();
    }
  }
  return path;
}

void read_checkpoint(const std::string& path, proto::CheckpointHeader* header, const std::vector<NamedTensor>& tensors,
                     const HeaderCheck& check_header) {
  std::ifstream in(path, std::ios::binary);
  uint64_t data_bytes = 0;
  const uint64_t data_start = read_header(in, path, header, &data_bytes);
  complete_stored_config(header->mutable_config());
  if (check_header) check_header(*header, path);
  for (const NamedTensor& t : tensors) {
    const auto entry = std::find_if(header->tensors().begin(), header->tensors().end(),
                                    [&](const proto::TensorEntry& e) { return e.name() == t.name; });
    DTRAIN_USAGE_CHECK(entry != header->tensors().end()) << "checkpoint " << path << " has no tensor " << t.name;
    DTRAIN_USAGE_CHECK(entry->count() == t.count) << "checkpoint " << path << ": tensor " << t.name << " has "
                                                  << entry->count() << " elements, the model " << t.count;
    const uint64_t bytes = t.count * sizeof(float);
    DTRAIN_USAGE_CHECK(entry->offset() <= data_bytes && bytes <= data_bytes - entry->offset())
        << "checkpoint " << path << " is truncated (tensor " << t.name << ")";
    in.seekg(static_cast<std::streamoff>(data_start + entry->offset()));
    in.read(reinterpret_cast<char*>(t.data), static_cast<std::streamsize>(bytes));
    DTRAIN_USAGE_CHECK(in.good()) << "checkpoint " << path << " is truncated (tensor " << t.name << ")";
    DTRAIN_USAGE_CHECK(runtime::crc32c(t.data, bytes) == entry->crc32c())
        << "checkpoint " << path << ": tensor " << t.name << " fails its CRC32C (corrupt file)";
  }
}

std::string resolve_checkpoint(const std::string& spec, const std::string& dir, proto::CheckpointHeader* header,
                               const std::vector<NamedTensor>& tensors, const HeaderCheck& check_header) {
  if (spec != "latest" && spec != "required") {
    read_checkpoint(spec, header, tensors, check_header);
    return spec;
  }
  bool refused_by_check = false;
  HeaderCheck guarded;
  if (check_header) {
    guarded = [&](const proto::CheckpointHeader& h, const std::string& path) {
      refused_by_check = true;
      check_header(h, path);
      refused_by_check = false;
    };
  }
  const std::vector<CheckpointFile> all = list_checkpoints(dir);
  DTRAIN_USAGE_CHECK(!all.empty()) << "--resume " << spec << ": no checkpoint in '" << dir << "'";
  for (const CheckpointFile& file : all) {
    try {
      read_checkpoint(file.path, header, tensors, guarded);
      return file.path;
    } catch (const runtime::UsageError& e) {
      if (refused_by_check) throw;
      DTRAIN_LOG(kWarn) << "skipping checkpoint: " << e.detail();
    }
  }
  DTRAIN_USAGE_FAIL() << "--resume " << spec << ": none of the " << all.size() << " checkpoints in " << dir
                      << " is valid";
}

}  // namespace dtrain::train
