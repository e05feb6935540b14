// SPDX-License-Identifier: Apache-2.0
// What `dtnn train` and `dtnn benchmark` print and write at the end of a run: the summary lines, the per-epoch
// history (--history, CSV or JSON) and the report (--report, JSON).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/training.hpp"

namespace dtnn::cli {

// The process's peak resident memory, MiB.
double peak_rss_mb();

// Training time and throughput, the test accuracy (when there is one) and the peak memory.
void print_train_summary(const History& history, const std::optional<EvalResult>& test);

// The per-epoch metrics, CSV or JSON by the file's extension.
void write_history(const std::string& file, const History& history);

// `run` (what ran: model, data, options, engine) with the results: times, throughput, memory, the weights
// checksum of every rank (rank 0's first), the history and the test metrics.
void write_train_report(const std::string& file, nlohmann::json run, const History& history,
                        const std::optional<EvalResult>& test, const std::vector<std::uint64_t>& checksums);

}  // namespace dtnn::cli
