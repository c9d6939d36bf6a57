#!/bin/bash
# The library's timeline on N ranks: timeline_abi_test.cc writes the files, check_library_timeline.py
# reads them with Python's json module.
#   timeline_test.sh SCRATCH_DIR NP TEST_BINARY MPIRUN...
set -eu
dir=$1 np=$2 binary=$3
shift 3
rm -rf "$dir"
mkdir -p "$dir"
"$@" -np "$np" "$binary" "$dir/trace.json" "$dir/at_shutdown.json"
/usr/bin/python3 "$(dirname "$0")/check_library_timeline.py" "$dir/trace.json" "$dir/at_shutdown.json" "$np"
