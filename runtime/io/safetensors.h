#pragma once
// The safetensors file format (Hugging Face's, read by PyTorch, JAX, candle, ...), our own writer
// and a strict reader:
//   uint64 little-endian N | N bytes of JSON header | the data section
// The header maps each tensor name to {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}
// (byte offsets into the data section, little-endian, C order) and may hold "__metadata__", an
// object of strings. The writer pads the header with spaces so the data starts 8-byte aligned and
// writes the file atomically (atomic_file.h).
//
// The reader treats the file as hostile: the header length is checked against the file size (and
// a 100 MiB cap) before anything is allocated; the JSON is parsed strictly (json_value.h: a
// duplicate tensor name is an error); every entry needs exactly dtype, shape and data_offsets, a
// known dtype, non-negative dimensions, and a byte range whose length is the shape's element count
// times the dtype's size (overflow checked); and the ranges must tile the data section exactly, in
// offset order, with no overlap, gap or byte past the end. Each error is a UsageError naming the
// file and the tensor.
#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace dtrain::runtime {

// Bytes per element of a safetensors dtype name ("F32" 4, "I64" 8, "BOOL" 1, ...); 0 if unknown.
size_t safetensors_dtype_size(const std::string& dtype);

struct SafetensorsEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;   // [] for a scalar
  uint64_t begin = 0, end = 0;  // bytes in the data section
  uint64_t bytes() const { return end - begin; }
};

// "[64, 3, 7, 7]", "[]" for a scalar.
std::string shape_text(const std::vector<int64_t>& shape);

// One tensor to write: element count of `shape` times the dtype's size bytes at `data`.
struct SafetensorsView {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

using SafetensorsMetadata = std::vector<std::pair<std::string, std::string>>;

// Writes `tensors` (in this order, names unique) to `path` through a temporary file. An Error
// naming `path` on an I/O failure, with no temporary left behind.
void write_safetensors(const std::string& path, const std::vector<SafetensorsView>& tensors,
                       const SafetensorsMetadata& metadata);

class SafetensorsReader {
 public:
  static constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

  // Opens `path` and verifies its header (above). UsageError naming the file on any problem.
  explicit SafetensorsReader(std::string path);

  const std::string& path() const { return path_; }
  // In the order of their data (offset order).
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const SafetensorsEntry* find(const std::string& name) const;
  const SafetensorsMetadata& metadata() const { return metadata_; }
  // The entry's bytes into `out` (entry.bytes() of them). UsageError naming the tensor if the file
  // is shorter than its header said (changed since it was opened).
  void read(const SafetensorsEntry& entry, void* out);

 private:
  std::string path_;
  std::ifstream in_;
  uint64_t data_start_ = 0;
  std::vector<SafetensorsEntry> entries_;
  SafetensorsMetadata metadata_;
};

}  // namespace dtrain::runtime
