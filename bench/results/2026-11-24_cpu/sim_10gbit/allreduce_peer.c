/* Plain MPI_Allreduce peer: 64 MiB fp32 sum, 3 warm-up, 10 timed, slowest rank's mean. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  size_t n = (size_t)16 << 20;
  float* a = malloc(n * 4); float* b = malloc(n * 4);
  for (size_t i = 0; i < n; ++i) a[i] = (float)(i % 7);
  for (int i = 0; i < 3; ++i) MPI_Allreduce(a, b, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  double t = MPI_Wtime();
  for (int i = 0; i < 10; ++i) MPI_Allreduce(a, b, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  t = (MPI_Wtime() - t) / 10; double worst;
  MPI_Reduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("plain MPI_Allreduce 64 MiB: %.4f s\n", worst);
  MPI_Finalize();
}
