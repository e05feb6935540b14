// SPDX-License-Identifier: Apache-2.0
// What `dtnn train` and `dtnn benchmark` print and write at the end of a run: the summary lines, the per-epoch
// history (--history, CSV or JSON) and the report (--report, JSON).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/optimizer.hpp"
#include "models/sequential.hpp"
#include "models/training.hpp"

namespace dtnn::app {

// The process's peak resident memory, MiB.
double peak_rss_mb();

// Where the memory of a run goes, MiB.
struct MemoryBreakdown {
  double weights = 0;          // parameter values
  double gradients = 0;        // parameter gradients and their per-tile partials
  double optimizer_state = 0;  // momentum and moment buffers
  double buffers = 0;          // BatchNorm running statistics
  // StarPU's host buffers (the transient activations and gradients of the steps in flight, evaluation's included):
  // the most live at once, and the most the allocator held (kept buffers included). 0 with --host-allocator starpu,
  // which does not count.
  double activations_peak = 0;
  double allocator_peak = 0;
  std::int64_t allocations = 0;
  std::int64_t reused = 0;
  double peak_rss = 0;  // the whole process: the above, the datasets, layers' scratch, kernels' workspaces, libraries
};
MemoryBreakdown memory_breakdown(Sequential& model, Optimizer& optimizer);

// Training time and throughput, the test accuracy (when there is one) and the peak memory with its breakdown.
void print_train_summary(const History& history, const std::optional<EvalResult>& test, const MemoryBreakdown& memory);

// The per-epoch metrics, CSV or JSON by the file's extension.
void write_history(const std::string& file, const History& history);

// `run` (what ran: model, data, options, engine) with the results: times, throughput, memory, the weights
// checksum of every rank (rank 0's first), the history and the test metrics.
void write_train_report(const std::string& file, nlohmann::json run, const History& history,
                        const std::optional<EvalResult>& test, const std::vector<std::uint64_t>& checksums,
                        const MemoryBreakdown& memory);

}  // namespace dtnn::app
