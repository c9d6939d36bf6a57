#pragma once
// Rank 0's TensorBoard event file (--tensorboard_dir): scalars (loss, lr, images/s, data wait,
// validation top-1/top-5/loss) and the effective config as text, in the format TensorBoard reads.
//
// An event file is a sequence of TFRecord records, each
//   uint64 length (little-endian), uint32 masked CRC-32C of those 8 bytes,
//   length bytes of a serialized Event, uint32 masked CRC-32C of them,
// the first Event carrying file_version "brain.Event:2". TensorBoard picks up every file in the
// directory whose name contains "tfevents". Each event is flushed as it is written, so TensorBoard
// shows a run as it trains and a crash loses nothing written before it.
#include <cstdint>
#include <cstdio>
#include <string>

namespace dtrain::train {

class TensorBoardWriter {
 public:
  // Empty `dir`: writes nothing. Otherwise creates `dir` if needed and starts a new file in it,
  // events.out.tfevents.<unix time>.<host>.<pid>; a UsageError naming the directory if it cannot.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  void scalar(const std::string& tag, double value, int64_t step);
  // For TensorBoard's text dashboard (markdown).
  void text(const std::string& tag, const std::string& markdown, int64_t step);
  // The file written to; empty for a writer that writes nothing.
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& bytes);

  std::string path_;
  std::FILE* file_ = nullptr;
  bool broken_ = false;  // a write failed (a full disk): warned once, nothing more is written
};

}  // namespace dtrain::train
