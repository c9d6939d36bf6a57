"""The C ABI through Python's ctypes, as the PyTorch layer will use it: load libdtrain.so, check the
ABI number, all-reduce a float32 array by name (completed by dtrain_wait, then dtrain_wait_stream,
which on host buffers is the same), read a bad-input error as a value, write a timeline that
Python's json module reads.
  mpirun -np 2 python3 ctypes_smoke.py path/to/libdtrain.so"""
import ctypes
import json
import os
import sys
import tempfile

ABI_VERSION = 1  # DTRAIN_ABI_VERSION of include/dtrain/dtrain.h
FLOAT32, SUM, HOST = 6, 0, 0
lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
lib.dtrain_last_error.restype = ctypes.c_char_p
lib.dtrain_version.restype = ctypes.c_char_p
lib.dtrain_allreduce.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int,
                                 ctypes.c_int, ctypes.c_double, ctypes.c_double, ctypes.c_int, ctypes.c_void_p,
                                 ctypes.POINTER(ctypes.c_int64)]
lib.dtrain_wait_stream.argtypes = [ctypes.c_int64, ctypes.c_void_p]
lib.dtrain_timeline_start.argtypes = [ctypes.c_char_p]


def check(status, what):
    if status != 0:
        sys.exit(f"{what}: status {status}: {lib.dtrain_last_error().decode()}")


check(lib.dtrain_check_abi(ABI_VERSION), "dtrain_check_abi")
check(lib.dtrain_init(), "dtrain_init")
rank, size = lib.dtrain_rank(), lib.dtrain_size()
trace = os.path.join(tempfile.mkdtemp(), "trace.json")  # rank 0's is the one written
check(lib.dtrain_timeline_start(trace.encode()), "dtrain_timeline_start")
values = (ctypes.c_float * 3)(rank, 2 * rank, 1)
handle = ctypes.c_int64()
check(lib.dtrain_allreduce(b"py/values", values, values, 3, FLOAT32, SUM, 1.0, 1.0, HOST, None, ctypes.byref(handle)),
      "dtrain_allreduce")
check(lib.dtrain_wait(handle), "dtrain_wait")
ranks = size * (size - 1) / 2
assert list(values) == [ranks, 2 * ranks, size], list(values)
check(lib.dtrain_allreduce(b"py/again", values, values, 3, FLOAT32, SUM, 1.0, 1.0, HOST, None, ctypes.byref(handle)),
      "dtrain_allreduce")
check(lib.dtrain_wait_stream(handle, None), "dtrain_wait_stream")
assert list(values) == [size * ranks, 2 * size * ranks, size * size], list(values)
check(lib.dtrain_timeline_stop(), "dtrain_timeline_stop")
if rank == 0:
    with open(trace) as f:
        tracks = {e["args"]["name"] for e in json.load(f)["traceEvents"] if e.get("name") == "thread_name"}
    assert tracks == {"py/values", "py/again"}, tracks
status = lib.dtrain_allreduce(b"py/bad", values, values, -3, FLOAT32, SUM, 1.0, 1.0, HOST, None, ctypes.byref(handle))
assert status == 1 and b"count: -3 is negative" in lib.dtrain_last_error(), (status, lib.dtrain_last_error())
check(lib.dtrain_shutdown(), "dtrain_shutdown")
print(f"ctypes: rank {rank} of {size}: dtrain {lib.dtrain_version().decode()}, sums right, bad input an error value")
