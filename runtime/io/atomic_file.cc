#include "runtime/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "runtime/base/error.h"

namespace dtrain::runtime {

AtomicFile::AtomicFile(std::string path, std::string what)
    : path_(std::move(path)), temporary_(path_ + ".tmp"), what_(std::move(what)) {
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    DTRAIN_FAIL() << "I/O error: cannot create " << what_ << " " << temporary_ << ": " << std::strerror(errno);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temporary_.c_str());
}

void AtomicFile::write(const void* data, size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    // write() returning 0 for a non-empty request means no space was left.
    if (n <= 0)
      DTRAIN_FAIL() << "I/O error writing " << what_ << " " << temporary_ << ": "
                    << std::strerror(n < 0 ? errno : ENOSPC);
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0)
    DTRAIN_FAIL() << "I/O error flushing " << what_ << " " << temporary_ << ": " << std::strerror(errno);
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) DTRAIN_FAIL() << "I/O error closing " << what_ << " " << temporary_ << ": " << std::strerror(errno);
  if (::rename(temporary_.c_str(), path_.c_str()) != 0) {
    DTRAIN_FAIL() << "I/O error renaming " << what_ << " " << temporary_ << " to " << path_ << ": "
                  << std::strerror(errno);
  }
  committed_ = true;
  std::string dir = std::filesystem::path(path_).parent_path().string();
  if (dir.empty()) dir = ".";
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const int failed = dir_fd < 0 || ::fsync(dir_fd) != 0 ? errno : 0;
  if (dir_fd >= 0) ::close(dir_fd);
  if (failed != 0)
    DTRAIN_FAIL() << "I/O error flushing the directory " << dir << " of " << what_ << " " << path_ << ": "
                  << std::strerror(failed);
}

void write_file_atomically(const std::string& path, std::string_view bytes, const std::string& what) {
  AtomicFile file(path, what);
  file.write(bytes);
  file.commit();
}

}  // namespace dtrain::runtime
