#include "runtime/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <set>

#include "runtime/base/error.h"
#include "runtime/io/atomic_file.h"
#include "runtime/io/json.h"
#include "runtime/io/json_value.h"

namespace dtrain::runtime {
namespace {

// The format is little-endian; so are the hosts dtrain runs on (x86-64, aarch64 Linux).
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

struct DTypeSize {
  const char* name;
  size_t bytes;
};
constexpr DTypeSize kDTypes[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
                                 {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
                                 {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};

// shape's element count times `size`, or false when that passes 2^63 bytes.
bool byte_count(const std::vector<int64_t>& shape, size_t size, uint64_t* out) {
  int64_t n = static_cast<int64_t>(size);
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return false;
  }
  *out = static_cast<uint64_t>(n);
  return true;
}

}  // namespace

size_t safetensors_dtype_size(const std::string& dtype) {
  for (const DTypeSize& d : kDTypes) {
    if (dtype == d.name) return d.bytes;
  }
  return 0;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsView>& tensors,
                       const SafetensorsMetadata& metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    JsonObject meta;
    for (const auto& [key, value] : metadata) meta.text(key, value);
    header += "\"__metadata__\":";
    header += meta.str();
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  std::vector<uint64_t> sizes;
  for (const SafetensorsView& t : tensors) {
    DTRAIN_CHECK(names.insert(t.name).second) << "safetensors " << path << ": tensor " << t.name << " given twice";
    const size_t element = safetensors_dtype_size(t.dtype);
    DTRAIN_CHECK(element > 0 && t.name != "__metadata__" && !t.name.empty())
        << "safetensors " << path << ": tensor '" << t.name << "' of dtype " << t.dtype;
    uint64_t bytes = 0;
    DTRAIN_CHECK(byte_count(t.shape, element, &bytes))
        << "safetensors " << path << ": tensor " << t.name << " too large";
    std::vector<std::string> dims;
    for (int64_t d : t.shape) dims.push_back(std::to_string(d));
    JsonObject entry;
    entry.text("dtype", t.dtype)
        .raw("shape", json_array(dims))
        .raw("data_offsets", json_array({std::to_string(offset), std::to_string(offset + bytes)}));
    if (header.size() > 1) header += ',';
    header += json_string(t.name);
    header += ':';
    header += entry.str();
    offset += bytes;
    sizes.push_back(bytes);
  }
  header += "}";
  // Spaces after the JSON are allowed; they put the data at a multiple of 8 bytes, so a reader
  // that maps the file sees every tensor aligned.
  header.append((8 - header.size() % 8) % 8, ' ');
  const uint64_t length = header.size();
  AtomicFile file(path, "safetensors file");
  file.write(&length, sizeof(length));
  file.write(header);
  for (size_t i = 0; i < tensors.size(); ++i) file.write(tensors[i].data, sizes[i]);
  file.commit();
}

namespace {

// The file's header, read after its length is checked against the file's size and the cap.
struct RawHeader {
  std::string json;
  uint64_t data_start = 0;  // where the data section starts in the file
  uint64_t data_bytes = 0;  // the data section's size
};

RawHeader read_raw_header(std::ifstream& in, const std::string& p, uint64_t max_header_bytes) {
  DTRAIN_USAGE_CHECK(in.good()) << "cannot open " << p << ": " << std::strerror(errno);
  in.seekg(0, std::ios::end);
  const std::streamoff end = in.tellg();
  in.seekg(0);
  DTRAIN_USAGE_CHECK(end >= 0 && in.good()) << "cannot read " << p << " (is it a regular file?)";
  const auto size = static_cast<uint64_t>(end);
  uint64_t length = 0;
  DTRAIN_USAGE_CHECK(size >= sizeof(length)) << p << ": " << size << " bytes, too short for a safetensors file";
  in.read(reinterpret_cast<char*>(&length), sizeof(length));
  DTRAIN_USAGE_CHECK(in.good() && length <= size - sizeof(length))
      << p << ": header length " << length << " does not fit the file's " << size
      << " bytes (not a safetensors file, or truncated)";
  DTRAIN_USAGE_CHECK(length <= max_header_bytes)
      << p << ": header length " << length << " is over the " << max_header_bytes << " bytes a header may have";
  RawHeader header;
  header.json.assign(length, '\0');
  in.read(header.json.data(), static_cast<std::streamsize>(length));
  DTRAIN_USAGE_CHECK(in.good()) << p << ": cannot read its header";
  header.data_start = sizeof(length) + length;
  header.data_bytes = size - header.data_start;
  return header;
}

// The "__metadata__" object's strings, appended to `out` in the header's order.
void parse_metadata(const JsonValue& value, const std::string& p, SafetensorsMetadata* out) {
  DTRAIN_USAGE_CHECK(value.is(JsonValue::Type::kObject)) << p << ": __metadata__ is not an object of strings";
  for (const auto& [key, text] : value.object()) {
    DTRAIN_USAGE_CHECK(text.is(JsonValue::Type::kString))
        << p << ": __metadata__ entry \"" << key << "\" is " << JsonValue::describe(text.type()) << ", not a string";
    out->emplace_back(key, text.string());
  }
}

// Dimensions of a tensor's "shape" array, each a non-negative integer.
std::vector<int64_t> parse_shape(const JsonValue& shape, const std::string& where) {
  DTRAIN_USAGE_CHECK(shape.is(JsonValue::Type::kArray)) << where << ": shape is not an array";
  std::vector<int64_t> dims;
  for (const JsonValue& d : shape.array()) {
    int64_t n = -1;
    DTRAIN_USAGE_CHECK(d.as_int64(&n) && n >= 0)
        << where << ": shape holds " << (d.is(JsonValue::Type::kNumber) ? d.string() : JsonValue::describe(d.type()))
        << ", not a dimension";
    dims.push_back(n);
  }
  return dims;
}

// One tensor's entry: exactly dtype, shape and data_offsets, a byte range as long as the shape
// needs, inside the data section's `data_bytes`.
SafetensorsEntry parse_entry(const std::string& name, const JsonValue& value, const std::string& p,
                             uint64_t data_bytes) {
  const std::string where = p + ": tensor " + name;
  DTRAIN_USAGE_CHECK(!name.empty()) << p << ": a tensor with an empty name";
  DTRAIN_USAGE_CHECK(value.is(JsonValue::Type::kObject)) << where << ": its entry is not an object";
  for (const auto& member : value.object()) {
    DTRAIN_USAGE_CHECK(member.first == "dtype" || member.first == "shape" || member.first == "data_offsets")
        << where << ": unknown field \"" << member.first << "\" (only dtype, shape and data_offsets)";
  }
  SafetensorsEntry e;
  e.name = name;
  const JsonValue* dtype = value.find("dtype");
  const JsonValue* shape = value.find("shape");
  const JsonValue* offsets = value.find("data_offsets");
  DTRAIN_USAGE_CHECK(dtype != nullptr && shape != nullptr && offsets != nullptr)
      << where << ": needs dtype, shape and data_offsets";
  DTRAIN_USAGE_CHECK(dtype->is(JsonValue::Type::kString) && safetensors_dtype_size(dtype->string()) > 0)
      << where << ": unknown dtype " << (dtype->is(JsonValue::Type::kString) ? dtype->string() : "(not a string)");
  e.dtype = dtype->string();
  e.shape = parse_shape(*shape, where);
  int64_t range[2] = {-1, -1};
  DTRAIN_USAGE_CHECK(offsets->is(JsonValue::Type::kArray) && offsets->array().size() == 2 &&
                     offsets->array()[0].as_int64(&range[0]) && offsets->array()[1].as_int64(&range[1]) &&
                     range[0] >= 0 && range[1] >= range[0])
      << where << ": data_offsets is not [begin, end] with 0 <= begin <= end";
  e.begin = static_cast<uint64_t>(range[0]);
  e.end = static_cast<uint64_t>(range[1]);
  uint64_t bytes = 0;
  DTRAIN_USAGE_CHECK(byte_count(e.shape, safetensors_dtype_size(e.dtype), &bytes))
      << where << ": shape " << shape_text(e.shape) << " is too large";
  DTRAIN_USAGE_CHECK(bytes == e.bytes()) << where << ": " << e.dtype << " " << shape_text(e.shape) << " needs " << bytes
                                         << " bytes, data_offsets [" << e.begin << ", " << e.end << "] hold "
                                         << e.bytes();
  DTRAIN_USAGE_CHECK(e.end <= data_bytes)
      << where << ": data_offsets [" << e.begin << ", " << e.end << "] reach past the data section's " << data_bytes
      << " bytes (truncated file?)";
  return e;
}

// Sorts `entries` by offset and checks that their ranges tile the data section: each starts where
// the previous ended, and the last ends with the file.
void sort_and_check_tiling(std::vector<SafetensorsEntry>& entries, const std::string& p, uint64_t data_bytes) {
  std::stable_sort(entries.begin(), entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  uint64_t expected = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const SafetensorsEntry& e = entries[i];
    DTRAIN_USAGE_CHECK(e.begin >= expected) << p << ": tensor " << e.name << " (bytes [" << e.begin << ", " << e.end
                                            << "]) overlaps tensor " << entries[i - 1].name;
    DTRAIN_USAGE_CHECK(e.begin == expected)
        << p << ": tensor " << e.name << " starts at byte " << e.begin << " of the data, leaving bytes [" << expected
        << ", " << e.begin << "] that belong to no tensor";
    expected = e.end;
  }
  DTRAIN_USAGE_CHECK(expected == data_bytes)
      << p << ": the tensors end at byte " << expected << " of the data, the file"
      << " holds " << data_bytes << " (trailing bytes that belong to no tensor)";
}

}  // namespace

SafetensorsReader::SafetensorsReader(std::string path) : path_(std::move(path)), in_(path_, std::ios::binary) {
  const RawHeader header = read_raw_header(in_, path_, kMaxHeaderBytes);
  data_start_ = header.data_start;
  const JsonValue root = parse_json(header.json, path_ + ": header");
  DTRAIN_USAGE_CHECK(root.is(JsonValue::Type::kObject)) << path_ << ": the header is not a JSON object";
  for (const auto& [name, value] : root.object()) {
    if (name == "__metadata__") {
      parse_metadata(value, path_, &metadata_);
    } else {
      entries_.push_back(parse_entry(name, value, path_, header.data_bytes));
    }
  }
  sort_and_check_tiling(entries_, path_, header.data_bytes);
}

const SafetensorsEntry* SafetensorsReader::find(const std::string& name) const {
  for (const SafetensorsEntry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

void SafetensorsReader::read(const SafetensorsEntry& entry, void* out) {
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(data_start_ + entry.begin));
  in_.read(static_cast<char*>(out), static_cast<std::streamsize>(entry.bytes()));
  DTRAIN_USAGE_CHECK(in_.good()) << path_ << ": tensor " << entry.name << " is cut short (the file changed?)";
}

}  // namespace dtrain::runtime
