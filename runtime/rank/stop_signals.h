#pragma once
// Preemption and time limits: signals that ask a run to stop cleanly (Slurm sends SIGTERM on
// preemption, and the signal of `#SBATCH --signal` before the time limit). The handler only
// records the signal; the training loop polls `stop_signal_received()` at step boundaries, the
// ranks agree on the step to stop at, write one checkpoint and exit with kExitPreempted
// (main_guard.h), which the sbatch script answers with `scontrol requeue`.
#include <string>
#include <vector>

namespace dtrain::runtime {

// "TERM,USR1" (names with or without SIG, or numbers) -> {SIGTERM, SIGUSR1}; "" -> {}. UsageError
// naming `what` and the entry on an unknown name.
std::vector<int> parse_signal_list(const std::string& list, const std::string& what);

// Installs the recording handler for `signals` (replacing any earlier set, whose signals return
// to their default action). Process-wide. A program installs it once, first thing in main, and
// never resets it: a stop signal while MPI starts, while data is opened, or while the program
// ends must be recorded, not take the default action and kill the rank (Slurm would then see a
// failure instead of a preemption, and not requeue).
void install_stop_signals(const std::vector<int>& signals);

// The first stop signal received since the process started, or 0. Async-signal-safe to set,
// cheap to read (an atomic load).
int stop_signal_received();

// "SIGTERM" for SIGTERM, "signal 42" for others.
std::string signal_name(int signal_number);

}  // namespace dtrain::runtime
