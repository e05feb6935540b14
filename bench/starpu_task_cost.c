// SPDX-License-Identifier: Apache-2.0
// What one task costs the StarPU this program is linked with: TASKS empty tasks, each reading BUFFERS-1 small
// vectors and writing one (independent but for those data), submitted and waited for; prints the best of three
// rounds in microseconds per task. Built in two build folders, it compares two StarPU builds (FxT compiled in
// or not, STARPU_NMAXBUFS, STARPU_MAXCPUS): bench/fxt_overhead.py runs it so. Tracing stays off, as in dtnn
// without --fxt.
//   starpu_task_cost [TASKS=50000] [BUFFERS=2] [WORKERS=1]
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void nothing(void* buffers[], void* arg) {
  (void)buffers;
  (void)arg;
}

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char** argv) {
  const int tasks = argc > 1 ? atoi(argv[1]) : 50000;
  const int buffers = argc > 2 ? atoi(argv[2]) : 2;
  const int workers = argc > 3 ? atoi(argv[3]) : 1;
  if (tasks < 1 || buffers < 1 || buffers > STARPU_NMAXBUFS || workers < 1) {
    fprintf(stderr, "starpu_task_cost: tasks=%d buffers=%d workers=%d, expected positive counts and at most %d "
            "buffers (STARPU_NMAXBUFS)\n", tasks, buffers, workers, STARPU_NMAXBUFS);
    return 2;
  }
  setenv("STARPU_FXT_TRACE", "0", 1);
  struct starpu_conf conf;
  starpu_conf_init(&conf);
  conf.ncpus = workers;
  conf.ncuda = 0;
  conf.nopencl = 0;
  conf.sched_policy_name = "lws";
  if (starpu_init(&conf) != 0) {
    fprintf(stderr, "starpu_task_cost: starpu_init failed\n");
    return 1;
  }
  struct starpu_codelet cl;
  starpu_codelet_init(&cl);
  cl.cpu_funcs[0] = nothing;
  cl.nbuffers = buffers;
  for (int i = 0; i + 1 < buffers; ++i) cl.modes[i] = STARPU_R;
  cl.modes[buffers - 1] = STARPU_W;

  enum { kHandles = 64 };
  static float data[kHandles][4];
  starpu_data_handle_t handles[kHandles];
  for (int i = 0; i < kHandles; ++i) {
    starpu_vector_data_register(&handles[i], STARPU_MAIN_RAM, (uintptr_t)data[i], 4, sizeof(float));
  }
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    const double start = seconds();
    for (int t = 0; t < tasks; ++t) {
      struct starpu_task* task = starpu_task_create();
      task->cl = &cl;
      for (int i = 0; i + 1 < buffers; ++i) task->handles[i] = handles[(t + i + 1) % kHandles];
      task->handles[buffers - 1] = handles[t % kHandles];
      if (starpu_task_submit(task) != 0) {
        fprintf(stderr, "starpu_task_cost: starpu_task_submit failed\n");
        return 1;
      }
    }
    starpu_task_wait_for_all();
    const double us = (seconds() - start) * 1e6 / tasks;
    if (us < best) best = us;
  }
  for (int i = 0; i < kHandles; ++i) starpu_data_unregister(handles[i]);
  starpu_shutdown();
  printf("%.3f\n", best);
  return 0;
}
