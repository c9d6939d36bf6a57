#pragma once
// Reads a TensorBoard event file back, as TensorBoard does: TFRecord framing, both masked CRC-32Cs
// checked, each record parsed as an Event. For tests of tensorboard_writer.h; an Error naming the
// file, the record and what is wrong for a damaged file.
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runtime/base/error.h"
#include "runtime/io/crc32c.h"
#include "train/proto/tensorboard_event.pb.h"

namespace dtrain::test {

inline uint64_t read_little_endian(const std::string& bytes, size_t at, int count) {
  uint64_t value = 0;
  for (int i = count - 1; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[at + i]);
  return value;
}

inline std::vector<tensorboard::Event> read_tensorboard_events(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DTRAIN_CHECK(in.good()) << "cannot open " << path;
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<tensorboard::Event> events;
  size_t at = 0;
  while (at < bytes.size()) {
    const size_t record = events.size();
    DTRAIN_CHECK(at + 12 <= bytes.size()) << path << ": record " << record << " has a truncated header";
    const std::string length_bytes = bytes.substr(at, 8);
    const uint64_t length = read_little_endian(bytes, at, 8);
    DTRAIN_CHECK(read_little_endian(bytes, at + 8, 4) == runtime::masked_crc32c(length_bytes))
        << path << ": record " << record << ": the length's CRC does not match";
    at += 12;
    DTRAIN_CHECK(at + length + 4 <= bytes.size()) << path << ": record " << record << " is truncated";
    const std::string data = bytes.substr(at, length);
    DTRAIN_CHECK(read_little_endian(bytes, at + length, 4) == runtime::masked_crc32c(data))
        << path << ": record " << record << ": the data's CRC does not match";
    at += length + 4;
    tensorboard::Event event;
    DTRAIN_CHECK(event.ParseFromString(data)) << path << ": record " << record << " is not an Event";
    events.push_back(std::move(event));
  }
  return events;
}

}  // namespace dtrain::test
