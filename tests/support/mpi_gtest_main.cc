// gtest main for multi-rank tests: every rank runs every test; rank 0 prints the usual report,
// other ranks print only their failures (with their rank prefix); the verdict is combined over all
// ranks, so the exit status is non-zero on every rank if any rank failed, and 77 (ctest's skip code)
// on every rank when every rank skipped every test (tests/support/gtest_verdict.h).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <sstream>
#include <string>
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

}  // namespace

int main(int argc, char** argv) {
  dtrain::runtime::MpiScope mpi(&argc, &argv);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  dtrain::runtime::set_process_identity(rank, size, -1);
  testing::InitGoogleTest(&argc, argv);

  if (rank != 0) {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter);
  }
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
  if (any_failed) return 1;
  return every_rank_skipped ? dtrain::test::kSkipExitCode : 0;
}
