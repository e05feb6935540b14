// SPDX-License-Identifier: Apache-2.0
// libdtnn.so's own translation unit: the library's code is the folders' static libraries, linked whole
// (lib/CMakeLists.txt). It checks, at every build, that the umbrella header keeps its promise: a program that
// includes <dtnn/dtnn.hpp> alone compiles without StarPU's and MPI's headers.
#include "dtnn/dtnn.hpp"

#if defined(STARPU_MAJOR_VERSION)
#error "<dtnn/dtnn.hpp> includes starpu.h: StarPU's types belong in <dtnn/task_graph.hpp>"
#endif
#if defined(MPI_VERSION)
#error "<dtnn/dtnn.hpp> includes mpi.h: MPI's types belong in <dtnn/distributed.hpp>"
#endif
