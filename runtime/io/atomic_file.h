#pragma once
// Files that appear whole or not at all (checkpoints, benchmark results): written to PATH.tmp,
// flushed to the disk, renamed over PATH, and the directory flushed, so the rename survives a
// crash too. Neither a crash nor a failed write (a full disk, an I/O error, an exception while
// writing) leaves half a file at PATH; a failure also removes PATH.tmp. Failures throw runtime::Error
// "I/O error ..." naming `what` (say "checkpoint") and the file.
#include <cstddef>
#include <string>
#include <string_view>

namespace dtrain::runtime {

class AtomicFile {
 public:
  AtomicFile(std::string path, std::string what);  // creates PATH.tmp
  ~AtomicFile();                                   // removes PATH.tmp unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  // fsync, close, rename to PATH, fsync PATH's directory.
  void commit();

 private:
  std::string path_;
  std::string temporary_;
  std::string what_;
  int fd_ = -1;
  bool committed_ = false;
};

// AtomicFile in one call.
void write_file_atomically(const std::string& path, std::string_view bytes, const std::string& what);

}  // namespace dtrain::runtime
