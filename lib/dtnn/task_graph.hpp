// SPDX-License-Identifier: Apache-2.0
// dtnn's task graph, for a layer with a codelet of its own (codelets/common.hpp: submit_task, task_args,
// runtime::guarded), a scheduling policy of one's own (runtime/sched.hpp), a step's graph as data (runtime/dag.hpp,
// DagCapture) or a training step submitted by hand (TrainStep). Unlike <dtnn/dtnn.hpp>, these are StarPU's types
// and include starpu.h: the find_package(dtnn) target and dtnn.pc carry StarPU's include directory and library.
#pragma once

#include "dtnn/dtnn.hpp"

#include "codelets/common.hpp"
#include "models/step_probes.hpp"
#include "models/train_step.hpp"
#include "runtime/codelet.hpp"
#include "runtime/dag.hpp"
#include "runtime/failure.hpp"
#include "runtime/sched.hpp"
