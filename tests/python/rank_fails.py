"""One rank fails while the others wait for it in an allreduce; the job must end, naming the rank.
  mpirun -np 2 python3 rank_fails.py exception    the last rank raises
  mpirun -np 2 python3 rank_fails.py interrupt    rank 0 gets SIGINT (Ctrl-C) while it waits"""
import os
import signal
import sys
import threading
import time

import harness
from harness import hvd, torch

harness.start()
last = hvd.rank() == hvd.size() - 1
if sys.argv[1] == "exception" and last:
    time.sleep(0.5)  # the others are waiting in the allreduce by now
    raise RuntimeError("a failure on the last rank")
if sys.argv[1] == "interrupt":
    if last:
        time.sleep(60)  # never submits: only the abort of the interrupted rank ends the job
    else:
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
hvd.allreduce(torch.ones(3), name="never completes")
print("rank_fails: the allreduce completed, which it cannot", flush=True)
