// SPDX-License-Identifier: Apache-2.0
// A scheduling policy of one's own (docs/scheduling.md): ready tasks with the largest flop count first. Registered
// by name, it runs the training step's task graph exactly as StarPU's own policies do. The program trains the same
// steps under it and under lws: the graph fixes the order of every sum, so the weights must agree bit for bit
// whatever the policy (exit status 1 otherwise); the step times show what the policy changes.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include <dtnn/task_graph.hpp>

// push() receives each task once its dependencies are satisfied, from any thread; pop(worker) is called by idle
// workers (again and again: StarPU's drivers poll) and returns a task that worker can run, or nullptr. The ready
// list is thread-safe and hands a worker only tasks it can execute.
class BiggestFirst : public dtnn::runtime::SchedulingPolicy {
 public:
  void push(starpu_task* task) override { ready_.push(task, task->flops); }
  starpu_task* pop(int worker) override { return ready_.pop(worker); }

 private:
  dtnn::runtime::ScoredReadyList ready_;
};

struct Trained {
  std::uint64_t checksum = 0;
  double median_step_s = 0.0;
};

// One engine per run (StarPU runs one at a time): resnet20 on synthetic data, 8 steps of batch 32 in 4 tiles.
Trained train_under(const char* scheduler) {
  using namespace dtnn;
  runtime::Engine engine(runtime::EngineOptions().scheduler(scheduler));
  const models::ModelInfo& info = models::find("resnet20_cifar10");
  Sequential model = info.make();
  model.build(info.input, 1);
  const io::Dataset data = io::synthetic_dataset(256, 3, 32, 32, 10, 2);
  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  auto timer = std::make_shared<StepTimer>();
  fit(model, sgd, data, FitOptions().batch_size(32).tiles(4).steps_per_epoch(8).verbose(false).callback(timer));
  std::vector<double> steps = timer->seconds();
  std::sort(steps.begin(), steps.end());
  return {model.weights_checksum(), steps.empty() ? 0.0 : steps[steps.size() / 2]};
}

int main() {
  dtnn::runtime::register_policy(
      {"biggest-first", "largest flop count first", [] { return std::make_unique<BiggestFirst>(); }});
  const Trained own = train_under("biggest-first");
  const Trained lws = train_under("lws");
  fmt::print("biggest-first: weights checksum {:016x}, median step {:.1f} ms\n", own.checksum, 1e3 * own.median_step_s);
  fmt::print("lws:           weights checksum {:016x}, median step {:.1f} ms\n", lws.checksum, 1e3 * lws.median_step_s);
  if (own.checksum != lws.checksum) {
    std::fprintf(stderr, "custom_policy: the weights differ between the policies, expected the same bits\n");
    return 1;
  }
  return 0;
}
