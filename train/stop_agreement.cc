#include "train/stop_agreement.h"

#include "runtime/mpi/mpi_check.h"
#include "runtime/rank/stop_signals.h"
#include "train/trainer_collective.h"

namespace dtrain::train {

bool StopAgreement::agreed_before_training() {
  mine_ = runtime::stop_signal_received();
  TrainerCollective watched(stall_, faults_, "trainer: stop-signal agreement (before training)");
  DTRAIN_MPI_CHECK(MPI_Allreduce(&mine_, &any_, 1, MPI_INT, MPI_MAX, world_));
  return any_ != 0;
}

bool StopAgreement::agreed() {
  ++calls_;
  if (request_ != MPI_REQUEST_NULL) {
    // Posted a step ago: by now every rank has long posted it too.
    TrainerCollective watched(stall_, faults_, "trainer: stop-signal agreement");
    DTRAIN_MPI_CHECK(MPI_Wait(&request_, MPI_STATUS_IGNORE));
    if (any_ != 0) return true;
  }
  mine_ = runtime::stop_signal_received();
  if (mine_ != 0 && noticed_call_ < 0) noticed_call_ = calls_;
  DTRAIN_MPI_CHECK(MPI_Iallreduce(&mine_, &any_, 1, MPI_INT, MPI_MAX, world_, &request_));
  return false;
}

void StopAgreement::finish() {
  if (request_ == MPI_REQUEST_NULL) return;
  TrainerCollective watched(stall_, faults_, "trainer: stop-signal agreement (last step)");
  DTRAIN_MPI_CHECK(MPI_Wait(&request_, MPI_STATUS_IGNORE));
}

std::string StopAgreement::source() const {
  return mine_ ? runtime::signal_name(mine_) : "on another rank";
}

}  // namespace dtrain::train
