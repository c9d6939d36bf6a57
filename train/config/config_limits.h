#pragma once
// Range checks of a TrainConfig that run before anything is allocated or started, so an absurd
// value is one usage error naming its field (the flag of the same name) instead of a bad_alloc, a
// length error, EAGAIN from thread creation or the kernel's OOM killer:
//  - every floating-point field is finite (--base_lr inf, nan), every integer field (and every
//    element of a repeated one) is not negative;
//  - the sizes that allocate or start threads stay within what a host can serve: image_size,
//    val_resize, loader_threads, prefetch_batches, bucket_mib (tail and first too), max_file_mib;
//  - the loader's batches (prefetch depth plus the two the engine holds, of batch_per_rank images
//    of image_size^2 x 3 bytes) fit in this host's memory: a cheap lower bound on what the run needs.
#include <cstdint>

#include "train/proto/train_config.pb.h"

namespace dtrain::train {

// Throws runtime::UsageError naming the first offending field. host_memory_bytes: this host's
// physical memory (0: read it from the system).
void validate_limits(const proto::TrainConfig& config, uint64_t host_memory_bytes = 0);

}  // namespace dtrain::train
