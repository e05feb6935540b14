// SPDX-License-Identifier: Apache-2.0
// dtnn's C++ API for building, training, evaluating and checkpointing models: the engine, tensors, layers, the
// model zoo, optimizers, schedules, the training loop, datasets and checkpoints. It needs neither StarPU's nor MPI's
// headers (the task graph is dtnn's business): <dtnn/task_graph.hpp> adds what a codelet or scheduling policy of
// one's own needs (StarPU's types), <dtnn/distributed.hpp> the data-parallel set-up (MPI's). docs/library.md.
#pragma once

#include "core/errors.hpp"
#include "io/checkpoint.hpp"
#include "io/cifar.hpp"
#include "io/dataset.hpp"
#include "io/h5dataset.hpp"
#include "io/idx.hpp"
#include "io/normalize.hpp"
#include "layers/activations.hpp"
#include "layers/batch_norm.hpp"
#include "layers/block.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/dropout.hpp"
#include "layers/init.hpp"
#include "layers/layer.hpp"
#include "layers/pooling.hpp"
#include "layers/random.hpp"
#include "layers/shortcut.hpp"
#include "layers/simple.hpp"
#include "models/checkpointing.hpp"
#include "models/diagnosis.hpp"
#include "models/fusion.hpp"
#include "models/optimizer.hpp"
#include "models/optimizers.hpp"
#include "models/preemption.hpp"
#include "models/recipe.hpp"
#include "models/schedules.hpp"
#include "models/sequential.hpp"
#include "models/training.hpp"
#include "models/zoo.hpp"
#include "runtime/engine.hpp"
#include "runtime/tensor.hpp"
