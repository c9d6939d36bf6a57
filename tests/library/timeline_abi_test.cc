// dtrain_timeline_start / dtrain_timeline_stop on host buffers, as a user program calls them:
//   timeline_abi_test TRACE AT_SHUTDOWN
// writes TRACE around a few named operations (fused all-reduces submitted in a rank-dependent
// order, a broadcast, an all-gather, a barrier and, on several ranks, a mismatch), then leaves
// AT_SHUTDOWN open for dtrain_shutdown to close. An unwritable path is an error naming it on rank
// 0. check_library_timeline.py then reads both files as JSON. Prints one line per failed check and
// exits 1 if any failed.
#include <dtrain/dtrain.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/library/abi_check.h"

namespace {

using dtrain::test::check;
using dtrain::test::failures;
using dtrain::test::text_has;

void wait_all(const std::vector<dtrain_handle>& handles, const char* what) {
  for (dtrain_handle h : handles) check(dtrain_wait(h) == DTRAIN_OK, what);
}

void run(const char* trace, const char* at_shutdown) {
  check(dtrain_init() == DTRAIN_OK, "init");
  const int rank = dtrain_rank();
  const int size = dtrain_size();
  const char* unwritable = "/nonexistent-dtrain-dir/trace.json";
  const int rc = dtrain_timeline_start(unwritable);
  if (rank == 0) {
    check(rc == DTRAIN_ERR_INVALID_ARGUMENT && text_has(unwritable), "an unwritable path is an error naming it");
  } else {
    check(rc == DTRAIN_OK, "ranks other than 0 write no timeline");
  }
  check(dtrain_timeline_start(trace) == DTRAIN_OK, "start");
  if (rank == 0) check(dtrain_timeline_start(trace) == DTRAIN_ERR_INVALID_ARGUMENT && text_has("already"), "twice");

  std::vector<float> grads(3, 1.0f);
  std::vector<dtrain_handle> handles;
  const char* names[] = {"grad/a", "grad/b", "grad/c"};
  for (int k = 0; k < 3; ++k) {
    const int j = rank % 2 ? 2 - k : k;  // another order on odd ranks
    dtrain_handle h = 0;
    check(dtrain_allreduce(names[j], &grads[static_cast<size_t>(j)], &grads[static_cast<size_t>(j)], 1, DTRAIN_FLOAT32,
                           DTRAIN_SUM, 1, 1, DTRAIN_HOST, nullptr, &h) == DTRAIN_OK,
          names[j]);
    handles.push_back(h);
  }
  int64_t value = rank;
  dtrain_handle h = 0;
  check(dtrain_broadcast("weights", &value, 1, DTRAIN_INT64, 0, DTRAIN_HOST, nullptr, &h) == DTRAIN_OK, "broadcast");
  handles.push_back(h);
  std::vector<int32_t> gathered(static_cast<size_t>(size), -1);
  int32_t mine = rank;
  check(dtrain_allgather("ranks", &mine, 1, gathered.data(), size, nullptr, DTRAIN_INT32, DTRAIN_HOST, nullptr, &h) ==
            DTRAIN_OK,
        "allgather");
  handles.push_back(h);
  check(dtrain_barrier("step-end", &h) == DTRAIN_OK, "barrier");
  handles.push_back(h);
  wait_all(handles, "operations complete");
  check(grads[0] == static_cast<float>(size) && value == 0 && gathered.back() == size - 1, "results");
  if (size > 1) {
    float x[2] = {0, 0};
    check(dtrain_allreduce("mismatched", x, x, rank == 0 ? 2 : 1, DTRAIN_FLOAT32, DTRAIN_SUM, 1, 1, DTRAIN_HOST,
                           nullptr, &h) == DTRAIN_OK,
          "mismatched submitted");
    check(dtrain_wait(h) == DTRAIN_ERR_MISMATCH, "mismatch");
  }
  check(dtrain_timeline_stop() == DTRAIN_OK, "stop");
  check(dtrain_timeline_stop() == DTRAIN_OK, "stop again does nothing");
  check(dtrain_barrier("after-stop", &h) == DTRAIN_OK && dtrain_wait(h) == DTRAIN_OK, "after stop");

  // Left open: dtrain_shutdown closes it.
  check(dtrain_timeline_start(at_shutdown) == DTRAIN_OK, "second start");
  check(dtrain_barrier("before-shutdown", &h) == DTRAIN_OK && dtrain_wait(h) == DTRAIN_OK, "before shutdown");
  check(dtrain_shutdown() == DTRAIN_OK, "shutdown");
  check(dtrain_timeline_start(trace) == DTRAIN_ERR_NOT_INITIALIZED, "start after shutdown");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s TRACE AT_SHUTDOWN\n", argv[0]);
    return 2;
  }
  run(argv[1], argv[2]);
  if (failures == 0) std::printf("timeline: all checks passed\n");
  return failures ? 1 : 0;
}
