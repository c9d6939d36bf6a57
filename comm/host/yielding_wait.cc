#include "comm/host/yielding_wait.h"

#include <chrono>
#include <thread>

#include "runtime/mpi/mpi_check.h"

namespace dtrain::comm {
namespace {

using Clock = std::chrono::steady_clock;

// About 10-50 us of MPI progress polls before the first yield.
constexpr int kSpinPolls = 128;
// A yield that kept us off the core this long means another thread needed it.
constexpr auto kContendedYield = std::chrono::microseconds(20);
// Between polls on a contended core. A sleeping thread wakes with priority over the compute
// threads that kept running (a yielding one waits out their time slices, milliseconds in which
// sockets fill and the link idles), and costs the core a few microseconds per nap.
constexpr auto kNap = std::chrono::microseconds(50);

}  // namespace

void wait_all_yielding(MPI_Request* requests, int count) {
  bool contended = false;
  for (int polls = 0;; ++polls) {
    int done = 0;
    DTRAIN_MPI_CHECK(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE));
    if (done) return;
    if (polls < kSpinPolls) continue;
    if (contended) {
      std::this_thread::sleep_for(kNap);
    } else {
      const Clock::time_point before = Clock::now();
      std::this_thread::yield();
      contended = Clock::now() - before > kContendedYield;
    }
  }
}

}  // namespace dtrain::comm
