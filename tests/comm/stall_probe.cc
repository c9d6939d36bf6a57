// dtrain-comm-stall-probe: a small job for the stall inspector's command-line tests
// (tests/comm/stall_test.sh). Every rank runs CALLS all-reduces of 2^20+3 fp32 on BACKEND; at its
// third call, rank STALLED_RANK stalls in one of three ways:
//   sleep:S  sleeps S seconds before it (its process, the watchdog included, runs: it answers "not
//            begun");
//   stop:S   stops its whole process with SIGSTOP before it; a child sends SIGCONT after S seconds
//            (0: never);
//   fail:S   its part of the call fails (DTRAIN_FAULT_INJECT=3,R) and it goes on elsewhere: it
//            sleeps S seconds and ends with status 1 (it answers "finished").
// Rank 0 prints "stall-probe: stall begins at <unix time>" just before that call, and every rank
// "stall-probe: done" after checking the sums. Thresholds: DTRAIN_STALL_WARNING_SECONDS and
// DTRAIN_STALL_ABORT_SECONDS.
//   dtrain-comm-stall-probe BACKEND STALLED_RANK sleep:S|stop:S [CALLS]
#include <mpi.h>
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/backends/hierarchical_communicator.h"
#include "comm/backends/mpi_communicator.h"
#include "comm/backends/mpi_ring_communicator.h"
#include "runtime/base/error.h"
#include "runtime/mpi/main_guard.h"
#include "runtime/mpi/mpi_scope.h"
#include "runtime/rank/rank_context.h"

namespace {

using namespace dtrain;

// The third argument, KIND:S, read once: how the stalled rank stalls, and for how many seconds.
struct StallPlan {
  std::string kind;  // sleep, stop or fail
  int seconds = 0;
};

StallPlan parse_stall(const std::string& how) {
  const size_t colon = how.find(':');
  StallPlan plan;
  if (colon != std::string::npos) plan = {how.substr(0, colon), std::stoi(how.substr(colon + 1))};
  DTRAIN_USAGE_CHECK(plan.kind == "sleep" || plan.kind == "stop" || plan.kind == "fail")
      << "stall '" << how << "': use sleep:S, stop:S or fail:S";
  return plan;
}

// Sleeps or stops the process (sleep, stop); a failing rank stalls by its fault instead.
void stall(const StallPlan& plan) {
  if (plan.kind == "sleep") {
    std::this_thread::sleep_for(std::chrono::seconds(plan.seconds));
    return;
  }
  if (plan.seconds > 0) {
    const pid_t parent = getpid();
    if (fork() == 0) {  // only async-signal-safe calls in the child
      sleep(static_cast<unsigned>(plan.seconds));
      kill(parent, SIGCONT);
      _exit(0);
    }
  }
  raise(SIGSTOP);
}

int probe(int argc, char** argv) {
  DTRAIN_USAGE_CHECK(argc == 4 || argc == 5)
      << "usage: dtrain-comm-stall-probe BACKEND STALLED_RANK sleep:S|stop:S [CALLS]";
  runtime::MpiScope mpi(&argc, &argv);
  const std::string backend = argv[1];
  const int stalled = std::stoi(argv[2]);
  const int calls = argc == 5 ? std::stoi(argv[4]) : 4;
  const StallPlan plan = parse_stall(argv[3]);
  const bool fails = plan.kind == "fail";
  // Read when the communicator is made, on every rank; only the stalled rank's third call fails.
  if (fails) setenv("DTRAIN_FAULT_INJECT", ("3," + std::to_string(stalled)).c_str(), 1);
  const runtime::RankContext ctx(MPI_COMM_WORLD, runtime::NodeLayout{1, true});
  std::unique_ptr<comm::Communicator> c;
  if (backend == "mpi-ring") c = std::make_unique<comm::MpiRingCommunicator>(ctx.world(), comm::RingTuning{});
  if (backend == "mpi") c = std::make_unique<comm::MpiCommunicator>(ctx.world());
  if (backend == "hierarchical") c = std::make_unique<comm::HierarchicalCommunicator>(ctx, false, comm::RingTuning{});
  DTRAIN_USAGE_CHECK(c != nullptr) << "backend '" << backend << "': use mpi-ring, mpi or hierarchical";
  const int rank = c->rank();
  const size_t count = (size_t{1} << 20) + 3;
  std::vector<float> data(count);
  for (int k = 0; k < calls; ++k) {
    for (float& x : data) x = static_cast<float>(rank + 1);
    if (k == 2) {
      if (rank == 0) {
        timeval now{};
        gettimeofday(&now, nullptr);
        std::printf("stall-probe: stall begins at %ld.%06ld\n", static_cast<long>(now.tv_sec),
                    static_cast<long>(now.tv_usec));
        std::fflush(stdout);
      }
      if (rank == stalled && !fails) stall(plan);
    }
    try {
      c->all_reduce(data.data(), data.data(), count, runtime::DType::kF32, comm::ReduceOp::kSum).wait();
    } catch (const runtime::Error& e) {
      if (!(fails && rank == stalled)) throw;
      std::printf("stall-probe: rank %d's part failed (%s); it goes on elsewhere\n", rank, e.what());
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::seconds(plan.seconds));
      return 1;
    }
    const float sum = static_cast<float>(c->size() * (c->size() + 1) / 2);
    DTRAIN_CHECK(data[0] == sum && data[count - 1] == sum) << "all-reduce " << k << " gave " << data[0];
  }
  std::printf("stall-probe: done on rank %d\n", rank);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return dtrain::runtime::run_main(argc, argv, probe);
}
