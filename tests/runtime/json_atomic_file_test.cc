// The JSON writer (escaping, non-finite numbers, layout) and atomic files (whole or nothing, no
// temporary left behind on failure).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "runtime/base/error.h"
#include "runtime/io/atomic_file.h"
#include "runtime/io/json.h"

namespace dtrain::runtime {
namespace {

namespace fs = std::filesystem;

TEST(Json, StringsAreEscaped) {
  EXPECT_EQ(json_string("plain"), "\"plain\"");
  EXPECT_EQ(json_string("a \"quoted\" \\ path"), "\"a \\\"quoted\\\" \\\\ path\"");
  EXPECT_EQ(json_string("tab\tline\nreturn\r"), "\"tab\\tline\\nreturn\\r\"");
  EXPECT_EQ(json_string(std::string("nul\0bell\x07", 9)), "\"nul\\u0000bell\\u0007\"");
  EXPECT_EQ(json_string("caf\xc3\xa9"), "\"caf\xc3\xa9\"");  // UTF-8 unchanged
}

TEST(Json, NonFiniteNumbersAreNull) {
  EXPECT_EQ(json_number(1.5), "1.5");
  EXPECT_EQ(json_number(2.0 / 3.0, "%.3f"), "0.667");
  EXPECT_EQ(json_number(NAN), "null");
  EXPECT_EQ(json_number(-INFINITY), "null");
}

TEST(Json, ObjectsAndArrays) {
  const std::string one_line = JsonObject()
                                   .text("name", "x\"y")
                                   .integer("count", -3)
                                   .number("rate", 0.25)
                                   .boolean("ok", true)
                                   .raw("list", json_array({"1", "2"}))
                                   .str();
  EXPECT_EQ(one_line, "{\"name\": \"x\\\"y\", \"count\": -3, \"rate\": 0.25, \"ok\": true, \"list\": [1, 2]}");
  EXPECT_EQ(JsonObject().integer("a", 1).integer("b", 2).str("  "), "{\n  \"a\": 1,\n  \"b\": 2\n}");
  EXPECT_EQ(json_array({}), "[]");
  EXPECT_EQ(JsonObject().str("  "), "{}");
}

class AtomicFileTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dtrain_atomic_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    fs::permissions(dir_, fs::perms::owner_all);
    fs::remove_all(dir_);
  }
  static std::string read(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  fs::path dir_;
};

TEST_F(AtomicFileTest, WritesWholeFileAndLeavesNoTemporary) {
  const fs::path path = dir_ / "result.json";
  write_file_atomically(path.string(), "old", "result");
  write_file_atomically(path.string(), "{\"new\": 1}\n", "result");
  EXPECT_EQ(read(path), "{\"new\": 1}\n");
  EXPECT_FALSE(fs::exists(path.string() + ".tmp"));
}

TEST_F(AtomicFileTest, UncommittedWriteLeavesTargetAndNoTemporary) {
  const fs::path path = dir_ / "ckpt.dtrain";
  write_file_atomically(path.string(), "complete", "checkpoint");
  {
    AtomicFile file(path.string(), "checkpoint");
    file.write("half of a new");
    // An exception while writing: the file goes out of scope without commit().
  }
  EXPECT_EQ(read(path), "complete");
  EXPECT_FALSE(fs::exists(path.string() + ".tmp"));
}

TEST_F(AtomicFileTest, UnwritableDirectoryIsAnIoErrorNamingTheFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: a read-only directory is still writable";
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);
  const std::string path = (dir_ / "x.json").string();
  try {
    write_file_atomically(path, "x", "--json file");
    FAIL() << "expected an I/O error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("I/O error: cannot create --json file " + path + ".tmp"), std::string::npos)
        << e.what();
  }
}

TEST_F(AtomicFileTest, MissingDirectoryIsAnIoErrorNamingTheFile) {
  const std::string path = (dir_ / "no" / "such" / "x.json").string();
  try {
    write_file_atomically(path, "x", "--json file");
    FAIL() << "expected an I/O error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("I/O error: cannot create --json file " + path + ".tmp: No such file"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dtrain::runtime
