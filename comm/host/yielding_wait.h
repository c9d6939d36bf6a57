#pragma once
// Waiting for MPI requests without holding a core another thread of the job needs.
//
// MPI_Wait polls in a loop: while a ring step waits on a slow link (a 1 Gbit/s network, a ring
// bound by its slowest hop), the comm thread burns a whole core. Where the job's threads outnumber
// the cores (CPU training, one compute thread per rank, ranks sharing a machine's cores), that
// core is taken from backward, which then runs up to twice as slowly. Here the thread polls a
// short while (a message that lands within microseconds is seen at once), then yields the core
// between polls. With a core to spare the yield returns at once (the latency of spinning, and
// shared-memory transports, which copy only while polled, keep their speed); a yield that kept the
// thread off the core for a while shows the core is contended, and from then on the thread naps
// between polls: the compute threads run, and the nap ends with the thread woken ahead of them.
#include <mpi.h>

namespace dtrain::comm {

// MPI_Waitall's contract (statuses ignored), yielding between polls after the first few.
void wait_all_yielding(MPI_Request* requests, int count);

}  // namespace dtrain::comm
