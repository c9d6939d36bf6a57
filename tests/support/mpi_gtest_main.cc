// gtest main for multi-rank tests: every rank runs every test; rank 0 prints the usual report,
// other ranks print only their failures (with their rank prefix); the verdict is combined over all
// ranks, so the exit status is non-zero on every rank if any rank failed, and 77 (ctest's skip code)
// on every rank when every rank skipped every test (tests/support/gtest_verdict.h).
//
// A rank whose test failed (an assertion, or an exception out of the body) may have left the other
// ranks waiting in a collective it never reached: after each test every rank meets the others in a
// barrier, and a failed rank that is not joined within DTRAIN_TEST_FAILED_RANK_WAIT_SECONDS (default
// 120; other ranks may still be finishing the test) names the test and ends the job with MPI_Abort
// instead of leaving it hung.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/base/log.h"
#include "runtime/base/process_identity.h"
#include "runtime/mpi/mpi_scope.h"
#include "tests/support/gtest_verdict.h"

namespace {

// Prints failed assertions of a non-zero rank, each as one prefixed block. The test name is
// remembered at OnTestStart: asking gtest for it inside OnTestPartResult would deadlock on its lock.
class FailurePrinter : public testing::EmptyTestEventListener {
  void OnTestStart(const testing::TestInfo& test) override {
    current_ = std::string(test.test_suite_name()) + "." + test.name();
  }
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::ostringstream text;
    text << "FAILED " << current_ << " at " << (result.file_name() ? result.file_name() : "?") << ":"
         << result.line_number() << ": " << result.summary();
    dtrain::runtime::write_log_line(dtrain::runtime::LogLevel::kError, text.str());
  }
  std::string current_;
};

// How long a failed rank waits for the others to finish the test before it aborts the job.
double failed_rank_wait_seconds() {
  const char* value = std::getenv("DTRAIN_TEST_FAILED_RANK_WAIT_SECONDS");
  if (value == nullptr || *value == '\0') return 120.0;
  char* end = nullptr;
  const double seconds = std::strtod(value, &end);
  if (*end != '\0' || !(seconds > 0)) {
    std::fprintf(stderr, "DTRAIN_TEST_FAILED_RANK_WAIT_SECONDS='%s' is not a positive number of seconds\n", value);
    std::exit(2);
  }
  return seconds;
}

// After each test, the ranks meet in a barrier on their own communicator. A rank that passed waits
// as long as it takes; a rank that failed waits at most `wait_seconds`, then aborts the job.
class EndOfTestBarrier : public testing::EmptyTestEventListener {
 public:
  EndOfTestBarrier(MPI_Comm comm, int rank, double wait_seconds)
      : comm_(comm), rank_(rank), wait_seconds_(wait_seconds) {}

  void OnTestEnd(const testing::TestInfo& test) override {
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Ibarrier(comm_, &request);
    if (!test.result()->Failed()) {
      MPI_Wait(&request, MPI_STATUS_IGNORE);
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    int done = 0;
    while (true) {
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (done) return;
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= wait_seconds_) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::ostringstream text;
    text << "[mpi] rank " << rank_ << " failed " << test.test_suite_name() << "." << test.name()
         << " and the other ranks have not finished it " << wait_seconds_
         << " s later (waiting in a collective this rank left?): aborting the job "
         << "(DTRAIN_TEST_FAILED_RANK_WAIT_SECONDS sets the wait)";
    dtrain::runtime::write_log_line(dtrain::runtime::LogLevel::kError, text.str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

 private:
  MPI_Comm comm_;
  int rank_;
  double wait_seconds_;
};

}  // namespace

int main(int argc, char** argv) {
  dtrain::runtime::MpiScope mpi(&argc, &argv);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  dtrain::runtime::set_process_identity(rank, size, -1);
  testing::InitGoogleTest(&argc, argv);
  // The barrier's own communicator: a test that left a collective open on MPI_COMM_WORLD cannot
  // match it.
  MPI_Comm end_of_test = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &end_of_test);

  if (rank != 0) {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter);
  }
  testing::UnitTest::GetInstance()->listeners().Append(
      new EndOfTestBarrier(end_of_test, rank, failed_rank_wait_seconds()));
  const std::string prefix = rank == 0 ? "" : "[rank " + std::to_string(rank) + "] ";
  const int verdict = dtrain::test::run_all_tests_with_verdict(prefix.c_str());
  const int failed = verdict != 0 && verdict != dtrain::test::kSkipExitCode ? 1 : 0;
  const int all_skipped = verdict == dtrain::test::kSkipExitCode ? 1 : 0;

  std::vector<int> failed_by_rank(static_cast<size_t>(size));
  MPI_Allgather(&failed, 1, MPI_INT, failed_by_rank.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int every_rank_skipped = 0;
  MPI_Allreduce(&all_skipped, &every_rank_skipped, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  int any_failed = 0;
  std::ostringstream failed_ranks;
  for (int r = 0; r < size; ++r) {
    if (failed_by_rank[static_cast<size_t>(r)]) {
      failed_ranks << (any_failed ? ", " : "") << r;
      any_failed = 1;
    }
  }
  if (rank == 0) {
    if (any_failed) {
      std::printf("[mpi] %d ranks: FAILED on rank(s) %s\n", size, failed_ranks.str().c_str());
    } else if (every_rank_skipped) {
      std::printf("[mpi] %d ranks: every test skipped on every rank: exit %d, which ctest reports as Skipped\n", size,
                  dtrain::test::kSkipExitCode);
    } else {
      std::printf("[mpi] %d ranks: all passed\n", size);
    }
  }
  MPI_Comm_free(&end_of_test);
  if (any_failed) return 1;
  return every_rank_skipped ? dtrain::test::kSkipExitCode : 0;
}
