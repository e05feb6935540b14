// SPDX-License-Identifier: Apache-2.0
// What an MPI_Allreduce (sum of floats) costs on this machine's MPI, by size: the network parameters of
// `dtnn simulate --ranks P --link-gbps G --link-latency-us L` for a validation against real ranks here
// (bench/simulation_study.py). Prints one JSON object: the best seconds per size and the fit of t = a + b * bytes
// (a the smallest message's time, b over the messages of 1 MB and more), read as a ring allreduce:
// a = 2 (P - 1) latency and b = 2 (P - 1) / (P * bandwidth).
//   mpirun -np 2 build/bin/allreduce_cost
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int compare(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  enum { kSizes = 8, kReps = 15 };
  const long counts[kSizes] = {256, 4096, 65536, 262144, 1048576, 2097152, 4194304, 6553600};  // up to a 25 MiB bucket, dtnn's default
  float* buffer = calloc((size_t)counts[kSizes - 1], sizeof(float));
  double medians[kSizes];
  for (int s = 0; s < kSizes; ++s) {
    double times[kReps];
    for (int r = 0; r < kReps; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double start = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, buffer, (int)counts[s], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double t = MPI_Wtime() - start;
      MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      times[r] = t;
    }
    // The best of the repetitions: what the MPI can do, without the other processes of a shared machine.
    qsort(times, kReps, sizeof(double), compare);
    medians[s] = times[0];
  }
  if (rank == 0) {
    // a: the smallest message's time; b: least squares of t - a = b * bytes over the messages of 1 MB or more.
    const double a = medians[0];
    double sxx = 0, sxy = 0;
    for (int s = 0; s < kSizes; ++s) {
      const double x = 4.0 * (double)counts[s], y = medians[s] - a;
      if (x < 1048576.0) continue;
      sxx += x * x;
      sxy += x * y;
    }
    const double b = sxy / sxx;
    const double steps = 2.0 * (size - 1);
    printf("{\"ranks\": %d, \"bytes\": [", size);
    for (int s = 0; s < kSizes; ++s) printf("%s%ld", s ? ", " : "", 4 * counts[s]);
    printf("], \"seconds\": [");
    for (int s = 0; s < kSizes; ++s) printf("%s%.6e", s ? ", " : "", medians[s]);
    printf("], \"link_latency_us\": %.3f, \"link_gbps\": %.3f}\n", a / steps * 1e6,
           steps / size / b * 8.0 / 1e9);
  }
  free(buffer);
  MPI_Finalize();
  return 0;
}
