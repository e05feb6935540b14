// SPDX-License-Identifier: Apache-2.0
// dtnn's data-parallel set-up (docs/data-parallel.md): the MPI world (runtime::Mpi), the communicator that sums
// gradients inside the task graph, and the start-up checks and weight broadcast of models/distributed.hpp. Unlike
// <dtnn/dtnn.hpp> these include mpi.h: a program using them finds MPI itself (find_package(MPI), MPI::MPI_C; or
// pkg-config's ompi-c) and runs under mpirun.
#pragma once

// MPI's C API only: Open MPI's and MPICH's mpi.h would otherwise declare their deprecated C++ bindings, which need a
// library of their own.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif

#include "dtnn/dtnn.hpp"

#include "models/distributed.hpp"
#include "runtime/communicator.hpp"
#include "runtime/mpi.hpp"
