// SPDX-License-Identifier: Apache-2.0
// Preemption: SIGTERM, SIGINT and SIGUSR1 (what batch schedulers such as SLURM send before they kill a job, and
// Ctrl-C) recorded instead of ending the process, so that training stops at the next step boundary with a checkpoint
// to resume from (FitOptions::stop_when, CheckpointCallback). A second of these signals ends the process at once
// with 128 + its number: checkpoints and reports are replaced atomically, so nothing is left half-written.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace dtnn {

class SignalStop {
 public:
  // Installs the handlers (one SignalStop at a time in a process); the destructor puts the previous ones back.
  SignalStop();
  ~SignalStop();
  SignalStop(const SignalStop&) = delete;
  SignalStop& operator=(const SignalStop&) = delete;

  // The first of the signals received since construction (its number), or 0.
  [[nodiscard]] int received() const;
  // What FitOptions::stop_when takes: received() whatever the step.
  [[nodiscard]] std::function<int(std::int64_t)> poll() const;
};

// "SIGTERM", "SIGINT", ... (strsignal's name where dtnn does not name it).
[[nodiscard]] std::string signal_name(int signal);

}  // namespace dtnn
