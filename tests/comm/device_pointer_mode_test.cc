// DTRAIN_MPI_DEVICE_POINTERS: the explicit modes, and a clear error naming the variable otherwise.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "comm/host/mpi_features.h"
#include "runtime/base/error.h"

namespace dtrain::comm {
namespace {

TEST(DevicePointerMode, ExplicitModesAndBadValues) {
  setenv("DTRAIN_MPI_DEVICE_POINTERS", "stage", 1);
  EXPECT_EQ(device_pointer_mode(), DevicePointerMode::kStage);
  setenv("DTRAIN_MPI_DEVICE_POINTERS", "direct", 1);
  EXPECT_EQ(device_pointer_mode(), DevicePointerMode::kDirect);
  setenv("DTRAIN_MPI_DEVICE_POINTERS", "direct-managed", 1);
  EXPECT_EQ(device_pointer_mode(), DevicePointerMode::kDirectManaged);
  setenv("DTRAIN_MPI_DEVICE_POINTERS", "yes", 1);
  try {
    device_pointer_mode();
    FAIL() << "no error";
  } catch (const runtime::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("DTRAIN_MPI_DEVICE_POINTERS='yes' is not a mode"), std::string::npos)
        << e.what();
  }
  unsetenv("DTRAIN_MPI_DEVICE_POINTERS");
}

}  // namespace
}  // namespace dtrain::comm
