#pragma once
// Pieces of the training log's progress lines and end-of-run summary, kept apart from the loop.
//
// Throughput, one definition everywhere in dtrain-train's log and metrics: images/s is the images
// trained by all ranks together (global batch x steps) over the wall time they took, measured on
// rank 0 (the ranks move in step, held together by the gradient all-reduce); "per rank" (per GPU on
// the GPU path) is that total divided by the world size.
#include <string>

namespace dtrain::train {

// "1h02m03s", "4m05s" (whole seconds from a minute on), "12.3s".
std::string format_duration(double seconds);

// Bytes as GiB with two decimals: "3.21 GiB".
std::string format_gib(double bytes);

// Seconds left in an epoch of `steps` steps after `done` of them took `elapsed` seconds, at the
// pace so far, where `steps_left` of them will still run (max_total_steps may stop it earlier).
double eta_seconds(double elapsed, long done, long steps_left);

}  // namespace dtrain::train
