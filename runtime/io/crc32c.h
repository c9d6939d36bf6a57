#pragma once
// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), table-driven: the checksum of checkpoint
// headers and tensors, and, in the "masked" form the TFRecord framing of TensorBoard event files
// uses (so that a CRC stored inside CRC-checked data does not check itself), of event records.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dtrain::runtime {

// CRC-32C of `bytes` bytes at `data`, continuing from `crc` (0 to start).
uint32_t crc32c(const void* data, size_t bytes, uint32_t crc = 0);
// ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(std::string_view bytes);

}  // namespace dtrain::runtime
