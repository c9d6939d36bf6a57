#include "train/config/config_limits.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "runtime/base/error.h"

namespace dtrain::train {
namespace {

namespace pb = google::protobuf;

// The largest values that make sense for sizes that allocate or start threads. Generous: ImageNet
// crops are 224-600 pixels, hosts have at most a few hundred cores.
constexpr int kMaxImageSide = 8192;
constexpr int kMaxLoaderThreads = 1024;
constexpr int kMaxPrefetchBatches = 1024;
constexpr int kMaxBucketMib = 16384;
constexpr int kMaxFileMib = 16384;
// Micro-batches per optimizer step: far beyond any use (it multiplies the global batch), low enough
// that a typo is caught before an epoch turns out to have no step at all.
constexpr int kMaxAccumulationSteps = 65536;

std::string bytes_text(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) {
    bytes /= 1024;
    ++u;
  }
  char text[64];
  std::snprintf(text, sizeof(text), u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return text;
}

// Every number of the message: finite floats, no negative integers (no field takes one).
void check_every_number(const proto::TrainConfig& c) {
  const pb::Descriptor* d = c.GetDescriptor();
  const pb::Reflection* r = c.GetReflection();
  for (int f = 0; f < d->field_count(); ++f) {
    const pb::FieldDescriptor* field = d->field(f);
    const int n = field->is_repeated() ? r->FieldSize(c, field) : 1;
    for (int i = 0; i < n; ++i) {
      const bool rep = field->is_repeated();
      const std::string item = rep ? " (item " + std::to_string(i + 1) + ")" : "";
      switch (field->cpp_type()) {
        case pb::FieldDescriptor::CPPTYPE_DOUBLE: {
          const double v = rep ? r->GetRepeatedDouble(c, field, i) : r->GetDouble(c, field);
          DTRAIN_USAGE_CHECK(std::isfinite(v)) << field->name() << item << " " << v << " is not a finite number";
          break;
        }
        case pb::FieldDescriptor::CPPTYPE_FLOAT: {
          const float v = rep ? r->GetRepeatedFloat(c, field, i) : r->GetFloat(c, field);
          DTRAIN_USAGE_CHECK(std::isfinite(v)) << field->name() << item << " " << v << " is not a finite number";
          break;
        }
        case pb::FieldDescriptor::CPPTYPE_INT32: {
          const int32_t v = rep ? r->GetRepeatedInt32(c, field, i) : r->GetInt32(c, field);
          DTRAIN_USAGE_CHECK(v >= 0) << field->name() << item << " " << v << " must not be negative";
          break;
        }
        case pb::FieldDescriptor::CPPTYPE_INT64: {
          const int64_t v = rep ? r->GetRepeatedInt64(c, field, i) : r->GetInt64(c, field);
          DTRAIN_USAGE_CHECK(v >= 0) << field->name() << item << " " << v << " must not be negative";
          break;
        }
        default: break;
      }
    }
  }
}

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

}  // namespace

void validate_limits(const proto::TrainConfig& c, uint64_t host_memory_bytes) {
  check_every_number(c);
  DTRAIN_USAGE_CHECK(c.image_size() <= kMaxImageSide)
      << "image_size " << c.image_size() << " is over the largest image side, " << kMaxImageSide << " pixels";
  DTRAIN_USAGE_CHECK(c.val_resize() <= 2 * kMaxImageSide)
      << "val_resize " << c.val_resize() << " is over the largest resize, " << 2 * kMaxImageSide << " pixels";
  DTRAIN_USAGE_CHECK(c.loader_threads() <= kMaxLoaderThreads)
      << "loader_threads " << c.loader_threads() << " is over " << kMaxLoaderThreads
      << " threads per rank (0 takes one per CPU of the rank's share)";
  DTRAIN_USAGE_CHECK(c.prefetch_batches() <= kMaxPrefetchBatches)
      << "prefetch_batches " << c.prefetch_batches() << " is over " << kMaxPrefetchBatches << " batches";
  DTRAIN_USAGE_CHECK(c.bucket_mib() <= kMaxBucketMib)
      << "bucket_mib " << c.bucket_mib() << " is over " << kMaxBucketMib << " MiB";
  DTRAIN_USAGE_CHECK(c.tail_bucket_mib() <= kMaxBucketMib)
      << "tail_bucket_mib " << c.tail_bucket_mib() << " is over " << kMaxBucketMib << " MiB";
  DTRAIN_USAGE_CHECK(c.first_bucket_mib() <= kMaxBucketMib)
      << "first_bucket_mib " << c.first_bucket_mib() << " is over " << kMaxBucketMib << " MiB";
  DTRAIN_USAGE_CHECK(c.accumulation_steps() <= kMaxAccumulationSteps)
      << "accumulation_steps " << c.accumulation_steps() << " is over " << kMaxAccumulationSteps
      << " micro-batches per optimizer step";
  DTRAIN_USAGE_CHECK(c.max_file_mib() <= kMaxFileMib)
      << "max_file_mib " << c.max_file_mib() << " is over " << kMaxFileMib << " MiB";

  // The loader's pixel buffers alone, in double so that no product overflows.
  const uint64_t memory = host_memory_bytes > 0 ? host_memory_bytes : physical_memory_bytes();
  const double side = c.image_size();
  const double loader_bytes = (static_cast<double>(c.prefetch_batches()) + 2) * c.batch_per_rank() * side * side * 3;
  DTRAIN_USAGE_CHECK(memory == 0 || loader_bytes <= static_cast<double>(memory))
      << "batch_per_rank " << c.batch_per_rank() << " of image_size " << c.image_size() << " with prefetch_batches "
      << c.prefetch_batches() << ": the loader's batches alone need " << bytes_text(loader_bytes)
      << ", more than this host's " << bytes_text(static_cast<double>(memory)) << " of memory";
}

}  // namespace dtrain::train
