#!/bin/bash
# Ctrl-C at a terminal: dtrain-run runs in a pseudo-terminal (script(1)) and gets the terminal's
# ^C. The job runs in a process group of its own, so mpirun never sees the SIGINT (it would kill the
# ranks a second later); dtrain-run relays it as SIGUSR1, and the run stops with a checkpoint and
# status 75.
#   ctrl_c_test.sh DTRAIN_RUN DTRAIN_TRAIN "MPI FLAGS"
set -u
run=$1
train=$2
mpi_args=$3
command -v script > /dev/null || { echo "SKIP: no script(1) (util-linux) for a pseudo-terminal"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; grep -v " step " "$work/log"; exit 1; }
flags="--model small-resnet --blocks_per_stage 1,1 --width 8 --image_size 32 --synthetic_samples 100000"
flags+=" --batch_per_rank 8 --epochs 1 --loader_threads 1 --log_every_steps 1 --checkpoint_dir $work/ck"
# script copies its stdin to the terminal: the ^C goes in once the run has logged a step.
# The terminal's SIGINT reaches the shell that script starts too; a non-interactive sh (dash) dies
# of it and never reports the status, where a user's interactive shell would have kept dtrain-run
# in a foreground job of its own. "trap : INT" keeps that shell alive and leaves dtrain-run the
# default disposition (a caught signal is reset at exec).
(for _ in $(seq 1200); do grep -q "epoch 0 step 3/" "$work/log" 2>/dev/null && break; sleep 0.1; done
 printf '\003'
 # script ends once its input does: keep it open until the run has ended.
 for _ in $(seq 1200); do grep -q "dtrain-run exited" "$work/log" 2>/dev/null && break; sleep 0.1; done) |
  timeout -s KILL 300 script -qec "trap : INT; $run -np 2 --mpi-args '$mpi_args' -- $train $flags; echo dtrain-run exited \$?" /dev/null \
  > "$work/log" 2>&1
grep -E "exited|stop signal|Forwarding" "$work/log"
grep -q "dtrain-run exited 75" "$work/log" || fail "dtrain-run did not exit 75 after ^C"
# Rank 0 logs the stop: "(SIGUSR1)" when the relayed signal reached it first, "(on another rank)"
# when rank 1's did and the ranks' stop agreement told rank 0 (either, on a loaded machine).
grep -Eq "stopped by a stop signal \((SIGUSR1|on another rank)\) at step [0-9]+ .*checkpoint written" "$work/log" ||
  fail "no checkpoint at the stop"
ls "$work"/ck/ckpt-*.dtrain > /dev/null || fail "no checkpoint file"
echo "PASS: ^C at a terminal stopped the run with a checkpoint and status 75"
