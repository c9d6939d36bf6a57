#include "train/observe/tensorboard_writer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/base/process_identity.h"
#include "runtime/io/crc32c.h"
#include "train/proto/tensorboard_event.pb.h"

namespace dtrain::train {
namespace {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

constexpr int kStringDataType = 7;  // TensorFlow's DT_STRING

std::string little_endian(uint64_t value, int bytes) {
  std::string out(static_cast<size_t>(bytes), '\0');
  for (int i = 0; i < bytes; ++i) out[static_cast<size_t>(i)] = static_cast<char>((value >> (8 * i)) & 0xFF);
  return out;
}

// `event` stamped now at `step`, holding one summary value named `tag`, which is returned to fill.
tensorboard::Summary::Value* summary_value(tensorboard::Event& event, const std::string& tag, int64_t step) {
  event.set_wall_time(unix_seconds());
  event.set_step(step);
  tensorboard::Summary::Value* value = event.mutable_summary()->add_value();
  value->set_tag(tag);
  return value;
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  DTRAIN_USAGE_CHECK(!error) << "tensorboard_dir " << dir << ": cannot create it: " << error.message();
  const std::string host = runtime::process_identity().host;
  path_ = (std::filesystem::path(dir) / ("events.out.tfevents." + std::to_string(static_cast<long>(unix_seconds())) +
                                         "." + host + "." + std::to_string(::getpid())))
              .string();
  file_ = std::fopen(path_.c_str(), "wb");
  DTRAIN_USAGE_CHECK(file_ != nullptr) << "tensorboard_dir " << dir << ": cannot write " << path_ << ": "
                                       << std::strerror(errno);
  tensorboard::Event first;
  first.set_wall_time(unix_seconds());
  first.set_file_version("brain.Event:2");
  write_record(first.SerializeAsString());
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void TensorBoardWriter::scalar(const std::string& tag, double value, int64_t step) {
  if (file_ == nullptr) return;
  tensorboard::Event event;
  summary_value(event, tag, step)->set_simple_value(static_cast<float>(value));
  write_record(event.SerializeAsString());
}

void TensorBoardWriter::text(const std::string& tag, const std::string& markdown, int64_t step) {
  if (file_ == nullptr) return;
  tensorboard::Event event;
  tensorboard::Summary::Value* v = summary_value(event, tag, step);
  v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  tensorboard::TensorProto* tensor = v->mutable_tensor();
  tensor->set_dtype(kStringDataType);
  tensor->mutable_tensor_shape();  // present and empty: a scalar string
  tensor->add_string_val(markdown);
  write_record(event.SerializeAsString());
}

void TensorBoardWriter::write_record(const std::string& bytes) {
  const std::string length = little_endian(bytes.size(), 8);
  std::string record = length;
  record += little_endian(runtime::masked_crc32c(length), 4);
  record += bytes;
  record += little_endian(runtime::masked_crc32c(bytes), 4);
  // One fwrite and a flush per record: a reader never sees half of one unless the disk fills.
  // A side output never costs the training: a full disk stops the events, not the run.
  if (broken_) return;
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() || std::fflush(file_) != 0) {
    broken_ = true;
    DTRAIN_LOG(kWarn) << "tensorboard: cannot write " << path_ << " (" << std::strerror(errno)
                      << "); no more events go to it, training goes on";
  }
}

}  // namespace dtrain::train
