/* The smallest dtrain program, in C: what the public header promises a C user. */
#include <dtrain/dtrain.h>
#include <stdio.h>

int main(void) {
  if (dtrain_check_abi(DTRAIN_ABI_VERSION) != DTRAIN_OK || dtrain_init() != DTRAIN_OK) {
    fprintf(stderr, "%s\n", dtrain_last_error());
    return 1;
  }
  float value = (float)dtrain_rank();
  dtrain_handle handle = 0;
  int status = dtrain_allreduce("value", &value, &value, 1, DTRAIN_FLOAT32, DTRAIN_SUM, 1.0, 1.0, DTRAIN_HOST, NULL,
                                &handle);
  if (status == DTRAIN_OK) status = dtrain_wait(handle);
  if (status != DTRAIN_OK) fprintf(stderr, "%s\n", dtrain_last_error());
  printf("dtrain %s: rank %d of %d, sum of ranks %g\n", dtrain_version(), dtrain_rank(), dtrain_size(), value);
  return dtrain_shutdown() == DTRAIN_OK && status == DTRAIN_OK ? 0 : 1;
}
