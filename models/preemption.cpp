// SPDX-License-Identifier: Apache-2.0
#include "models/preemption.hpp"

#include <unistd.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstring>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dtnn {
namespace {

constexpr std::array<int, 3> kSignals = {SIGTERM, SIGINT, SIGUSR1};

// The first signal received; a handler only ever touches this lock-free atomic (async-signal-safe).
std::atomic<int> g_received{0};
std::atomic<bool> g_installed{false};
struct sigaction g_previous[kSignals.size()];

void on_signal(int signal) {
  int none = 0;
  if (!g_received.compare_exchange_strong(none, signal)) _exit(128 + signal);
}

}  // namespace

SignalStop::SignalStop() {
  if (g_installed.exchange(true)) {
    throw InvalidArgument("SignalStop: one is installed already, expected one at a time in a process");
  }
  g_received.store(0);
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  // Interrupted system calls (reads, waits) go on: the request is only read at step boundaries.
  action.sa_flags = SA_RESTART;
  for (std::size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &action, &g_previous[i]);
}

SignalStop::~SignalStop() {
  for (std::size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
  g_installed.store(false);
}

int SignalStop::received() const { return g_received.load(); }

std::function<int(std::int64_t)> SignalStop::poll() const {
  return [](std::int64_t) { return g_received.load(); };
}

std::string signal_name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return fmt::format("signal {} ({})", signal, strsignal(signal));
  }
}

}  // namespace dtnn
