// The safetensors writer and its strict reader (the weights PyTorch users exchange with dtrain),
// and the strict JSON reader under it. Every damaged file is refused with a UsageError naming the
// file and the tensor; nothing is read out of bounds or allocated from an unchecked length.
#include "runtime/io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "runtime/base/error.h"
#include "runtime/io/json_value.h"
#include "tests/support/test_seed.h"

namespace dtrain::runtime {
namespace {

namespace fs = std::filesystem;

// The UsageError's text of `body`, or "" if it throws none.
std::string usage_error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const UsageError& e) {
    return e.detail();
  }
  return "";
}

class Safetensors : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dtrain_safetensors_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A file of `header` (the JSON, its length in front) and `data` bytes, as a damaged file would be.
  std::string raw(const std::string& name, const std::string& header, size_t data_bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    const uint64_t length = header.size();
    out.write(reinterpret_cast<const char*>(&length), sizeof(length));
    out << header << std::string(data_bytes, '\x01');
    return path;
  }
  std::string refusal(const std::string& header, size_t data_bytes) {
    const std::string path = raw("damaged.safetensors", header, data_bytes);
    return usage_error_of([&] { SafetensorsReader reader(path); });
  }

  fs::path dir_;
};

TEST_F(Safetensors, WrittenTensorsReadBackBitForBit) {
  std::mt19937_64 rng(test::random_seed());
  std::normal_distribution<float> normal;
  std::vector<float> conv(64 * 3 * 7 * 7), bias(10);
  for (float& v : conv) v = normal(rng);
  for (float& v : bias) v = normal(rng);
  const int64_t tracked = 1234567890123;
  const std::string path = (dir_ / "w.safetensors").string();
  write_safetensors(path,
                    {{"conv1.weight", "F32", {64, 3, 7, 7}, conv.data()},
                     {"bn1.num_batches_tracked", "I64", {}, &tracked},
                     {"fc.bias", "F32", {10}, bias.data()}},
                    {{"format", "pt"}, {"note", "a \"quoted\" value"}});
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  SafetensorsReader reader(path);
  ASSERT_EQ(reader.entries().size(), 3u);
  EXPECT_EQ(reader.metadata(), (SafetensorsMetadata{{"format", "pt"}, {"note", "a \"quoted\" value"}}));
  const SafetensorsEntry* c = reader.find("conv1.weight");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->dtype, "F32");
  EXPECT_EQ(c->shape, (std::vector<int64_t>{64, 3, 7, 7}));
  std::vector<float> conv_back(conv.size());
  reader.read(*c, conv_back.data());
  EXPECT_EQ(std::memcmp(conv_back.data(), conv.data(), conv.size() * 4), 0);
  const SafetensorsEntry* t = reader.find("bn1.num_batches_tracked");
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->shape.empty());
  int64_t tracked_back = 0;
  reader.read(*t, &tracked_back);
  EXPECT_EQ(tracked_back, tracked);
  // The data section starts 8-byte aligned (the header is padded with spaces).
  std::ifstream in(path, std::ios::binary);
  uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), 8);
  EXPECT_EQ(length % 8, 0u);
}

TEST_F(Safetensors, EmptyFileOfNoTensorsIsValid) {
  const std::string path = (dir_ / "empty.safetensors").string();
  write_safetensors(path, {}, {});
  SafetensorsReader reader(path);
  EXPECT_TRUE(reader.entries().empty());
}

TEST_F(Safetensors, LengthsThatDoNotFitTheFileAreRefusedBeforeAllocating) {
  const std::string short_file = (dir_ / "short.safetensors").string();
  std::ofstream(short_file) << "abc";
  EXPECT_NE(usage_error_of([&] { SafetensorsReader r(short_file); }).find("too short for a safetensors file"),
            std::string::npos);
  // A header length past the file's end.
  const std::string path = raw("long.safetensors", "{}", 0);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    const uint64_t huge = uint64_t{1} << 62;
    f.write(reinterpret_cast<const char*>(&huge), 8);
  }
  EXPECT_NE(usage_error_of([&] { SafetensorsReader r(path); }).find("does not fit the file's 10 bytes"),
            std::string::npos);
  // Over the header cap in a (sparse) file large enough to hold it.
  const std::string big = (dir_ / "big.safetensors").string();
  {
    std::ofstream out(big, std::ios::binary);
    const uint64_t length = SafetensorsReader::kMaxHeaderBytes + 8;
    out.write(reinterpret_cast<const char*>(&length), 8);
  }
  fs::resize_file(big, SafetensorsReader::kMaxHeaderBytes + 64);
  EXPECT_NE(usage_error_of([&] { SafetensorsReader r(big); }).find("is over the"), std::string::npos);
}

TEST_F(Safetensors, DamagedHeadersAreRefusedNamingTheTensor) {
  const std::string ok = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  EXPECT_EQ(refusal("{" + ok + "}", 8), "");  // the baseline reads
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{" + ok + "," + ok + "}", "duplicate key \"a\""},
      {R"({"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", "tensor a: unknown dtype F31"},
      {R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", "tensor a: shape holds -2"},
      {R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", "tensor a: shape holds 2.0"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8]}})", "tensor a: data_offsets is not [begin, end]"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", "tensor a: data_offsets is not [begin, end]"},
      {R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "tensor a: F32 [3] needs 12 bytes"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", "tensor a: unknown field \"extra\""},
      {R"({"a":{"dtype":"F32","shape":[2]}})", "tensor a: needs dtype, shape and data_offsets"},
      {R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", "tensor a: shape"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", "tensor a: data_offsets [0, 16] reach past"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", "tensor a starts at byte 4 of the data"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "the tensors end at byte 4 of the data"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       "overlaps tensor a"},
      {R"({"__metadata__":{"format":1},)" + ok + "}", "__metadata__ entry \"format\" is a number"},
      {R"([1,2])", "the header is not a JSON object"},
      {"{" + ok + "} x", "unexpected text after the JSON value"},
      {"{" + ok + ",}", "expected a string key"},
      {"{" + ok + R"(,"b":01})", "leading zero"},
      {std::string(100, '[') + std::string(100, ']'), "nesting deeper than 64"},
      {R"({"a\ud800":1})", "lone high surrogate"},
      {"{\"a\x01\":1}", "control character"},
      {"{\"\xff\":1}", "invalid UTF-8"},
      {"{\"a\xf8\x80\x80"
       "b\":1}",
       "invalid UTF-8"},                       // 0xF5-0xFF never lead a sequence
      {"{\"a\xc0\x80\":1}", "invalid UTF-8"},  // an overlong NUL
      {"/*c*/{" + ok + "}", "invalid value"},
  };
  for (const auto& [header, expected] : cases) {
    const std::string error = refusal(header, 8);
    EXPECT_NE(error.find(expected), std::string::npos) << header << "\n  refused with: '" << error << "'";
    EXPECT_NE(error.find("damaged.safetensors"), std::string::npos) << "the error names the file: " << error;
  }
}

TEST_F(Safetensors, AFileCutAfterOpeningIsNamedAtTheRead) {
  std::vector<float> v(100, 1.0f);
  const std::string path = (dir_ / "cut.safetensors").string();
  write_safetensors(path, {{"w", "F32", {100}, v.data()}}, {});
  SafetensorsReader reader(path);
  fs::resize_file(path, fs::file_size(path) - 10);
  EXPECT_NE(usage_error_of([&] { reader.read(reader.entries()[0], v.data()); }).find("tensor w is cut short"),
            std::string::npos);
}

TEST(JsonValue, ParsesWhatRfc8259Allows) {
  const JsonValue v = parse_json(R"( {"s": "a\"\u00e9\ud83d\ude00", "n": -12, "f": 1.5e3, "t": true, "z": null,
                                     "a": [1, [], {}]} )",
                                 "test");
  ASSERT_TRUE(v.is(JsonValue::Type::kObject));
  EXPECT_EQ(v.find("s")->string(), "a\"\xc3\xa9\xf0\x9f\x98\x80");
  int64_t n = 0;
  EXPECT_TRUE(v.find("n")->as_int64(&n));
  EXPECT_EQ(n, -12);
  EXPECT_FALSE(v.find("f")->as_int64(&n)) << "1.5e3 is not written as an integer";
  EXPECT_TRUE(v.find("t")->boolean());
  EXPECT_TRUE(v.find("z")->is(JsonValue::Type::kNull));
  EXPECT_EQ(v.find("a")->array().size(), 3u);
  EXPECT_EQ(v.find("missing"), nullptr);
  EXPECT_FALSE(parse_json("99999999999999999999", "big").as_int64(&n)) << "past int64";
}

}  // namespace
}  // namespace dtrain::runtime
