#pragma once
// Checkpoint files: a protobuf header (effective config, position, data seed, tensor table with
// CRC32C) followed by the tensors. Written by one rank to a temporary file, fsynced, then renamed,
// so a crash never leaves a half-written checkpoint under the final name; the last `keep` are kept.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/train/proto/checkpoint.pb.h"

namespace dtrain::train {

struct NamedTensor {
  std::string name;
  float* data = nullptr;
  size_t count = 0;
};

// CRC-32C (Castagnoli), the checksum of the tensor table.
uint32_t crc32c(const void* data, size_t bytes, uint32_t crc = 0);

// Writes `dir`/ckpt-<global_step>.dtrain atomically and deletes all but the newest `keep`.
// Returns the path. UsageError naming the path on I/O failure.
std::string write_checkpoint(const std::string& dir, proto::CheckpointHeader header, const std::vector<NamedTensor>& tensors,
                             int keep);

// Reads and verifies `path` into `header` and the tensors (matched by name and size).
// UsageError naming the file if it is truncated, corrupt or does not fit the model.
void read_checkpoint(const std::string& path, proto::CheckpointHeader* header, const std::vector<NamedTensor>& tensors);

// `spec` is a path, or "latest": the newest checkpoint in `dir` that verifies, falling back to older
// ones (each rejected file is reported). UsageError if there is none.
std::string resolve_checkpoint(const std::string& spec, const std::string& dir, proto::CheckpointHeader* header,
                               const std::vector<NamedTensor>& tensors);

}  // namespace dtrain::train
