"""`import dtrain.torch` with the wrong libdtrain.so: each case must raise ImportError naming the file
it found and the ABI versions (the package's, and the library's where it has one), never another
exception or a silent fall back to a different library.

Fake libraries are compiled here with the C compiler CMake found: one of ABI 2 (as a libdtrain of a
newer release), one that is no libdtrain at all.
Usage: library_load_test.py CC REAL_LIBRARY (REAL_LIBRARY: build/lib/libdtrain.so.1)."""
import os
import pathlib
import subprocess
import sys
import tempfile

cc, real = sys.argv[1], pathlib.Path(sys.argv[2])
failures = []

ABI2_SOURCE = """
int dtrain_abi_version(void) { return 2; }
const char* dtrain_version(void) { return "9.8.7"; }
int dtrain_check_abi(int expected) { return expected == 2 ? 0 : 1; }
"""
NOT_DTRAIN_SOURCE = "int something_else(void) { return 1; }\n"


def compile_library(source, path, soname):
    c_file = path.parent / f"{path.name}-source.c"
    c_file.write_text(source)
    subprocess.run([cc, "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(path), str(c_file)], check=True)


def import_torch(env_changes):
    env = {k: v for k, v in os.environ.items() if k not in ("DTRAIN_LIBRARY", "LD_LIBRARY_PATH")}
    env.update(env_changes)
    run = subprocess.run([sys.executable, "-c", "import dtrain.torch, dtrain._library as l; print('loaded', l.path)"],
                         env=env, capture_output=True, text=True, timeout=120)
    return run.returncode, run.stdout + run.stderr


def expect(case, env_changes, *texts, status=1):
    code, output = import_torch(env_changes)
    last = output.strip().splitlines()[-3:] if output.strip() else ["(no output)"]
    missing = [t for t in texts if t not in output]
    if code != status or missing:
        failures.append(f"{case}: exit {code} (expected {status}); missing {missing} in:\n{output}")
    elif status != 0 and "ImportError: dtrain:" not in output:
        failures.append(f"{case}: not an ImportError:\n{output}")
    else:
        print(f"ok: {case}: {' | '.join(last)}")


with tempfile.TemporaryDirectory() as scratch:
    scratch = pathlib.Path(scratch)
    newer = scratch / "newer"
    newer.mkdir()
    compile_library(ABI2_SOURCE, newer / "libdtrain.so.2", "libdtrain.so.2")
    # A stale install: the newer release's library under this ABI's name, found by the loader.
    stale = scratch / "stale"
    stale.mkdir()
    compile_library(ABI2_SOURCE, stale / "libdtrain.so.1", "libdtrain.so.1")
    other = scratch / "libother.so"
    compile_library(NOT_DTRAIN_SOURCE, other, "libother.so")
    text = scratch / "libdtrain.so.1"
    text.write_text("not a shared object, long enough to have an ELF header's size\n" * 4)

    expect("missing file", {"DTRAIN_LIBRARY": str(scratch / "none" / "libdtrain.so.1")},
           f"{scratch}/none/libdtrain.so.1 ($DTRAIN_LIBRARY): no such file", "This package expects ABI 1",
           "set DTRAIN_LIBRARY to the path of libdtrain.so.1")
    expect("a folder with another ABI's library only", {"DTRAIN_LIBRARY": str(newer)},
           f"{newer}/libdtrain.so.1 ($DTRAIN_LIBRARY): no such file (the folder has libdtrain.so.2: another ABI)",
           "This package expects ABI 1")
    expect("a text file", {"DTRAIN_LIBRARY": str(text)}, f"{text} ($DTRAIN_LIBRARY): ",
           "invalid ELF header", "This package expects ABI 1")
    expect("a library that is not libdtrain", {"DTRAIN_LIBRARY": str(other)},
           f"{other} ($DTRAIN_LIBRARY) is not a libdtrain (it has no dtrain_abi_version)",
           "this package expects libdtrain ABI 1")
    expect("ABI 2 by DTRAIN_LIBRARY", {"DTRAIN_LIBRARY": str(newer / "libdtrain.so.2")},
           f"{newer}/libdtrain.so.2 ($DTRAIN_LIBRARY) has ABI 2 (libdtrain 9.8.7), but this package expects ABI 1")
    expect("ABI 2 named libdtrain.so.1 on LD_LIBRARY_PATH", {"LD_LIBRARY_PATH": str(stale)},
           f"{stale}/libdtrain.so.1 (the dynamic loader's search path (LD_LIBRARY_PATH, ldconfig)) has ABI 2 "
           "(libdtrain 9.8.7), but this package expects ABI 1")
    # The right library through each way of naming it: the path reported is the file loaded.
    expect("the real library by DTRAIN_LIBRARY", {"DTRAIN_LIBRARY": str(real)}, f"loaded {real}", status=0)
    expect("the real library on LD_LIBRARY_PATH", {"LD_LIBRARY_PATH": str(real.parent)},
           f"loaded {real.resolve()}", status=0)

if failures:
    print("FAIL:\n" + "\n".join(failures))
    sys.exit(1)
print("library_load: all checks passed")
