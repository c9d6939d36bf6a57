#pragma once
// Checkpoint files: a protobuf header (effective config, position, data seed, run id, tensor table
// with CRC32C) under its own CRC32C, followed by the tensors. Written by one rank to a temporary
// file, fsynced, renamed, and the directory fsynced, so a crash never leaves a half-written
// checkpoint under the final name; a failed write removes its temporary file.
//
// Names: ckpt-<global_step>-<run_id>.dtrain, run_id 16 hex digits. Only names of exactly that form
// (or ckpt-<step>.dtrain of older versions) are checkpoints: "ckpt-5000-good.dtrain" is not one.
// Rotation keeps the newest `keep` files of the writing run and never touches another run's. When
// the disk has less room than the next file needs, the files beyond the newest keep - 1 go before
// the write, never the newest good one (so a full disk still leaves the last good checkpoint).
//
// Errors: a file that is missing, truncated, corrupt or does not fit the model is a UsageError
// naming it; a failed write (full disk, I/O error) is an Error naming the file.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "train/proto/checkpoint.pb.h"

namespace dtrain::train {

struct NamedTensor {
  std::string name;
  float* data = nullptr;
  size_t count = 0;
};

// A fresh run id: 16 lowercase hex digits.
std::string new_run_id();

// Parses a file name (no directory) of the form ckpt-<step>-<run_id>.dtrain, or the older
// ckpt-<step>.dtrain (run_id empty). Steps are decimal without a sign or leading zeros.
bool parse_checkpoint_name(const std::string& filename, int64_t* step, std::string* run_id);

// One checkpoint file found in a directory. written_unix_ns: from its header; 0 for files of older
// versions, -1 where the header cannot be read or fails its checksum.
struct CheckpointFile {
  std::string path;
  int64_t step = 0;
  std::string run_id;
  int64_t written_unix_ns = -1;
};

// The checkpoints in `dir`, newest written first (ties: higher step first). Empty if `dir` does
// not exist.
std::vector<CheckpointFile> list_checkpoints(const std::string& dir);

// Removes temporaries left by a write that was killed (ckpt-*.dtrain.tmp names as the writer makes
// them, in `dir` only). Returns their paths. Call before this run writes.
std::vector<std::string> remove_stale_temporaries(const std::string& dir);

// Writes `dir`/ckpt-<global_step>-<run_id>.dtrain atomically (header.run_id() must be a run id;
// written_unix_ns is set here), then deletes all but the newest `keep` files of that run.
// Returns the path. Error naming the file on I/O failure, with no temporary file left behind.
std::string write_checkpoint(const std::string& dir, proto::CheckpointHeader header,
                             const std::vector<NamedTensor>& tensors, int keep);

// Reads and verifies `path` into `header` and the tensors (matched by name and size).
// UsageError naming the file if it is truncated, corrupt or does not fit the model.
// check_header, when given, sees the verified header before any tensor is read (the resume's
// config comparison, so that a changed model is named as such rather than as a tensor's size).
using HeaderCheck = std::function<void(const proto::CheckpointHeader& header, const std::string& path)>;
void read_checkpoint(const std::string& path, proto::CheckpointHeader* header, const std::vector<NamedTensor>& tensors,
                     const HeaderCheck& check_header = nullptr);

// `spec` is a path, or "latest" / "required": the newest written checkpoint in `dir` that verifies,
// falling back to older ones (each rejected file is reported). UsageError if there is none (the
// trainer starts fresh instead on "latest" when `dir` holds no checkpoint at all).
// An error from check_header is never skipped: it ends the resume.
std::string resolve_checkpoint(const std::string& spec, const std::string& dir, proto::CheckpointHeader* header,
                               const std::vector<NamedTensor>& tensors, const HeaderCheck& check_header = nullptr);

}  // namespace dtrain::train
