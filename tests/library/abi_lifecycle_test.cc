// The C ABI's life cycle, each mode in a process of its own (the library starts once per process):
//   lifecycle    calls before dtrain_init and after dtrain_shutdown are errors naming the state;
//                init twice, shut down twice, init after shutdown are errors; dtrain_init starts
//                and finalizes MPI itself
//   comm         dtrain_init_comm on the caller's communicator of the odd world ranks
//   thread-level MPI initialized with MPI_THREAD_SERIALIZED: dtrain_init says what to do
//   bad-setting VAR  VAR set to a bad value (DTRAIN_FUSION_THRESHOLD=lots, DTRAIN_GPU_BACKEND=gloo):
//                dtrain_init names the variable, MPI untouched
//   stall        every rank submits "A"; only rank 0 submits "B": the warning names B and the
//                ranks missing, and DTRAIN_STALL_ABORT_SECONDS fails B on every rank
// Prints one line per failed check and exits 1 if any failed.
#include <dtrain/dtrain.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "tests/library/abi_check.h"

namespace {

using dtrain::test::check;
using dtrain::test::failures;
using dtrain::test::text_has;

void lifecycle() {
  float x = 1;
  dtrain_handle h = 0;
  check(dtrain_is_initialized() == 0 && dtrain_rank() == -1 && dtrain_size() == -1, "topology -1 before init");
  check(dtrain_allreduce("x", &x, &x, 1, DTRAIN_FLOAT32, DTRAIN_SUM, 1, 1, DTRAIN_HOST, nullptr, &h) ==
            DTRAIN_ERR_NOT_INITIALIZED,
        "allreduce before init");
  check(text_has("dtrain_allreduce: dtrain is not initialized (call dtrain_init first)"), "text before init");
  check(dtrain_wait(1) == DTRAIN_ERR_NOT_INITIALIZED, "wait before init");
  check(dtrain_shutdown() == DTRAIN_ERR_NOT_INITIALIZED, "shutdown before init");
  int64_t operations = 0;
  int64_t collectives = 0;
  check(dtrain_fusion_stats(&operations, &collectives) == DTRAIN_ERR_NOT_INITIALIZED, "fusion stats before init");
  check(dtrain_init() == DTRAIN_OK, "init");
  check(dtrain_is_initialized() == 1 && dtrain_rank() >= 0, "initialized");
  check(dtrain_init() == DTRAIN_ERR_INVALID_ARGUMENT && text_has("already initialized"), "init twice");
  check(dtrain_allreduce("x", &x, &x, 1, DTRAIN_FLOAT32, DTRAIN_SUM, 1, 1, DTRAIN_HOST, nullptr, &h) == DTRAIN_OK,
        "allreduce");
  check(dtrain_wait(h) == DTRAIN_OK, "wait");
  check(dtrain_shutdown() == DTRAIN_OK, "shutdown");
  check(dtrain_is_initialized() == 0, "not initialized after shutdown");
  check(dtrain_barrier("b", &h) == DTRAIN_ERR_NOT_INITIALIZED && text_has("shut down"), "barrier after shutdown");
  check(dtrain_shutdown() == DTRAIN_ERR_NOT_INITIALIZED && text_has("already been shut down"), "shutdown twice");
  check(dtrain_init() == DTRAIN_ERR_NOT_INITIALIZED && text_has("cannot start again"), "init after shutdown");
  int finalized = 0;
  MPI_Finalized(&finalized);
  check(finalized == 1, "dtrain_init started MPI, so dtrain_shutdown finalized it");
}

void on_communicator() {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &half);
  int half_size = 0;
  MPI_Comm_size(half, &half_size);
  check(dtrain_init_comm_fortran(MPI_Comm_c2f(half)) == DTRAIN_OK, "init on a split communicator");
  check(dtrain_rank() == world_rank / 2 && dtrain_size() == half_size, "rank and size of the communicator");
  int64_t value = world_rank;
  dtrain_handle h = 0;
  check(dtrain_allreduce("v", &value, &value, 1, DTRAIN_INT64, DTRAIN_MAX, 1, 1, DTRAIN_HOST, nullptr, &h) == DTRAIN_OK,
        "allreduce");
  check(dtrain_wait(h) == DTRAIN_OK, "wait");
  int world_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const int last_of_parity = (world_size - 1) % 2 == world_rank % 2 ? world_size - 1 : world_size - 2;
  check(value == last_of_parity, "max over the communicator's ranks only");
  check(dtrain_shutdown() == DTRAIN_OK, "shutdown");
  int finalized = 0;
  MPI_Finalized(&finalized);
  check(finalized == 0, "MPI stays the caller's");
  MPI_Comm_free(&half);
  MPI_Finalize();
}

int thread_level() {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  if (provided >= MPI_THREAD_MULTIPLE) {
    std::printf("skipped: this MPI granted MPI_THREAD_MULTIPLE when asked for MPI_THREAD_SERIALIZED\n");
    MPI_Finalize();
    return 77;
  }
  check(dtrain_init() == DTRAIN_ERR_MPI, "init below MPI_THREAD_MULTIPLE fails");
  check(text_has("needs MPI_THREAD_MULTIPLE") && text_has("MPI_THREAD_SERIALIZED") && text_has("MPI_Init_thread"),
        "the text says what is missing and what to do");
  check(dtrain_is_initialized() == 0, "not initialized");
  MPI_Finalize();
  return failures ? 1 : 0;
}

void bad_setting(const char* variable) {
  check(dtrain_init() == DTRAIN_ERR_INVALID_ARGUMENT && text_has(variable),
        "a malformed setting is an error naming the variable");
  check(dtrain_is_initialized() == 0, "not initialized");
  int initialized = 1;
  MPI_Initialized(&initialized);
  check(initialized == 0, "MPI untouched");
}

void stall() {
  check(dtrain_init() == DTRAIN_OK, "init");
  float a = 1;
  float b = 1;
  dtrain_handle ha = 0;
  dtrain_handle hb = 0;
  check(dtrain_allreduce("A", &a, &a, 1, DTRAIN_FLOAT32, DTRAIN_SUM, 1, 1, DTRAIN_HOST, nullptr, &ha) == DTRAIN_OK,
        "A");
  if (dtrain_rank() == 0)
    check(dtrain_allreduce("B", &b, &b, 1, DTRAIN_FLOAT32, DTRAIN_SUM, 1, 1, DTRAIN_HOST, nullptr, &hb) == DTRAIN_OK,
          "B");
  check(dtrain_wait(ha) == DTRAIN_OK && a == static_cast<float>(dtrain_size()), "A completes");
  if (dtrain_rank() == 0) {
    check(dtrain_wait(hb) == DTRAIN_ERR_STALLED, "B fails as stalled on rank 0");
    check(text_has("allreduce 'B'") && text_has("rank(s) 1"), "the error names B and rank 1");
  } else {
    // Past the abort time: the late submission fails at once, as B did on rank 0.
    sleep(6);
    check(dtrain_allreduce("B", &b, &b, 1, DTRAIN_FLOAT32, DTRAIN_SUM, 1, 1, DTRAIN_HOST, nullptr, &hb) == DTRAIN_OK,
          "late B");
    check(dtrain_wait(hb) == DTRAIN_ERR_STALLED && text_has("'B'"), "late B fails as stalled");
  }
  check(dtrain_shutdown() == DTRAIN_OK, "shutdown");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "lifecycle") {
    lifecycle();
  } else if (mode == "comm") {
    on_communicator();
  } else if (mode == "thread-level") {
    return thread_level();
  } else if (mode == "bad-setting" && argc > 2) {
    bad_setting(argv[2]);
  } else if (mode == "stall") {
    stall();
  } else {
    std::fprintf(stderr, "usage: %s lifecycle|comm|thread-level|bad-setting VAR|stall\n", argv[0]);
    return 2;
  }
  if (failures == 0) std::printf("%s: all checks passed\n", mode.c_str());
  return failures ? 1 : 0;
}
