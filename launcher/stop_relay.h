#pragma once
// How dtrain-run runs the job command (mpirun or srun) so that the ways users stop a job stop it
// cleanly. Open MPI's mpirun answers SIGTERM and SIGINT by signalling the ranks and SIGKILLing
// them about a second later (odls_base_sigkill_timeout, 1 s in 4.1): too soon for a checkpoint of
// any size, so the run restarted from its last periodic checkpoint, or from step 0. SIGUSR1 and
// SIGUSR2 it only forwards (ess_base_forward_signals), and srun forwards them too.
//
// So dtrain-run starts the command as a child instead of becoming it, and turns the first SIGTERM
// or SIGINT it gets (timeout(1), a container runtime, Kubernetes, Ctrl-C) into `relayed` (SIGUSR1,
// one of dtrain-train's default stop signals) sent to the command. The ranks then agree on a step,
// write their checkpoint and exit 75, and dtrain-run exits with the command's status. A second
// SIGTERM or SIGINT is passed on as SIGTERM: mpirun's hard stop, for a user who will not wait.
// SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are passed on unchanged.
//
// With a controlling terminal the command runs in a process group of its own (so Ctrl-C reaches
// dtrain-run alone, not mpirun as well), its stdin from /dev/null where that was the terminal (a
// background group that read the terminal would be stopped). The command gets SIGTERM if
// dtrain-run dies (PR_SET_PDEATHSIG).
#include <string>
#include <vector>

namespace dtrain::launcher {

// Runs argv (argv[0] searched on PATH) with `environment` added to this process's, relaying stop
// signals as above; returns its exit status (128 + N when signal N ended it). UsageError naming
// argv[0] when it cannot be started.
int run_relaying_stop_signals(const std::vector<std::string>& argv, int relayed);

}  // namespace dtrain::launcher
