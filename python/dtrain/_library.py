"""Finds libdtrain.so, checks its ABI number and declares the C functions' types (ctypes).

Where it looks, in order: $DTRAIN_LIBRARY (the file, or a directory holding it); the package's own
_lib/ folder (a `pip install ./python` from a build copies the library there); the lib directory of
the prefix this package was installed into with `cmake --install`; the dynamic loader's search path
(LD_LIBRARY_PATH, ldconfig). The first that exists is loaded; if it fails to load, or its ABI is
another, the ImportError says which file and why.

It is loaded with RTLD_GLOBAL: Open MPI's components are shared objects that expect libmpi's
symbols in the global namespace, which a library opened RTLD_LOCAL (ctypes' default) keeps private.
"""
import ctypes
import os
import pathlib

ABI_VERSION = 1  # DTRAIN_ABI_VERSION of include/dtrain/dtrain.h
LIBRARY_VARIABLE = "DTRAIN_LIBRARY"
SONAME = f"libdtrain.so.{ABI_VERSION}"

# dtrain_status codes.
OK, INVALID_ARGUMENT, NOT_INITIALIZED, MISMATCH, STALLED, MPI, UNSUPPORTED, UNKNOWN_HANDLE, SHUT_DOWN, INTERNAL = range(10)
# dtrain_dtype, dtrain_op, dtrain_device.
UINT8, INT8, INT32, INT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64 = range(8)
OP_SUM, OP_AVERAGE, OP_MIN, OP_MAX = range(4)
HOST, CUDA = 0, 1


def _candidates():
    """(path, where it came from) in search order; a path without a slash goes to the loader."""
    env = os.environ.get(LIBRARY_VARIABLE)
    if env:
        path = pathlib.Path(env)
        yield (path / SONAME if path.is_dir() else path), f"${LIBRARY_VARIABLE}"
        return  # a path the user set is the only one tried: never a different library silently
    package = pathlib.Path(__file__).resolve().parent
    yield package / "_lib" / SONAME, "the package's _lib/ (pip install from a build)"
    try:
        from dtrain import _install_location  # written by cmake --install
        yield (package / _install_location.LIBRARY_DIR).resolve() / SONAME, "the cmake --install prefix"
    except ImportError:
        pass
    yield SONAME, "the dynamic loader's search path (LD_LIBRARY_PATH, ldconfig)"


def _load():
    looked = []
    for path, origin in _candidates():
        name = str(path)
        if isinstance(path, pathlib.Path) and not path.exists():
            looked.append(f"{name} ({origin}): no such file{_other_abis(path)}")
            continue
        try:
            lib = ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            looked.append(f"{name} ({origin}): {e}")
            if isinstance(path, pathlib.Path):
                break  # the file exists but does not load: say so rather than try another
            continue
        if not isinstance(path, pathlib.Path):
            name = _loaded_file(name) or name
        _check_abi(lib, name, origin)
        _declare(lib)
        return lib, name
    raise ImportError("dtrain: cannot load libdtrain.so; looked at:\n  " + "\n  ".join(looked) +
                      f"\nThis package expects ABI {ABI_VERSION}: set {LIBRARY_VARIABLE} to the path of {SONAME} "
                      "(in a build: build/lib/; installed: <prefix>/lib/).")


def _check_abi(lib, name, origin):
    """ImportError naming the file and both ABI versions unless `lib` is a libdtrain of ABI_VERSION.

    Asks the library for its number (dtrain_abi_version, in every ABI) rather than trusting its
    file name, which a copy or a symbolic link may change."""
    if not hasattr(lib, "dtrain_abi_version"):
        raise ImportError(f"dtrain: {name} ({origin}) is not a libdtrain (it has no dtrain_abi_version); this "
                          f"package expects libdtrain ABI {ABI_VERSION} ({SONAME}): set {LIBRARY_VARIABLE} to it")
    lib.dtrain_abi_version.restype, lib.dtrain_abi_version.argtypes = ctypes.c_int, []
    found = lib.dtrain_abi_version()
    if found != ABI_VERSION:
        version = ""
        if hasattr(lib, "dtrain_version"):
            lib.dtrain_version.restype, lib.dtrain_version.argtypes = ctypes.c_char_p, []
            version = f" (libdtrain {lib.dtrain_version().decode(errors='replace')})"
        raise ImportError(f"dtrain: {name} ({origin}) has ABI {found}{version}, but this package expects ABI "
                          f"{ABI_VERSION}: set {LIBRARY_VARIABLE} to a {SONAME}, or install the dtrain package "
                          f"of ABI {found}")


def _other_abis(path):
    """' (the folder has libdtrain.so.N: another ABI)' where other ABIs' libraries lie beside a missing
    `path` (DTRAIN_LIBRARY naming a folder of an older or newer build), else ''."""
    try:
        others = sorted(p.name for p in path.parent.glob("libdtrain.so.*") if p.suffix[1:].isdigit())
    except OSError:
        return ""
    return f" (the folder has {', '.join(others)}: another ABI)" if others else ""


def _loaded_file(soname):
    """The file the dynamic loader chose for `soname`, from this process's memory map."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                file = line.rstrip("\n").split(maxsplit=5)[-1]
                base = os.path.basename(file)
                if file.startswith("/") and (base == soname or base.startswith(soname + ".")):
                    return file
    except OSError:
        pass
    return None


def _declare(lib):
    c_int, c_int64, c_double, c_void_p, c_char_p = (ctypes.c_int, ctypes.c_int64, ctypes.c_double, ctypes.c_void_p,
                                                    ctypes.c_char_p)
    handle_p = ctypes.POINTER(ctypes.c_int64)
    signatures = {
        "dtrain_version": (c_char_p, []),
        "dtrain_abi_version": (c_int, []),
        "dtrain_check_abi": (c_int, [c_int]),
        "dtrain_last_error": (c_char_p, []),
        "dtrain_status_name": (c_char_p, [c_int]),
        "dtrain_init": (c_int, []),
        "dtrain_init_comm": (c_int, [c_void_p]),
        "dtrain_shutdown": (c_int, []),
        "dtrain_allreduce": (c_int, [c_char_p, c_void_p, c_void_p, c_int64, c_int, c_int, c_double, c_double, c_int,
                                     c_void_p, handle_p]),
        "dtrain_broadcast": (c_int, [c_char_p, c_void_p, c_int64, c_int, c_int, c_int, c_void_p, handle_p]),
        "dtrain_allgather": (c_int, [c_char_p, c_void_p, c_int64, c_void_p, c_int64, c_void_p, c_int, c_int, c_void_p,
                                     handle_p]),
        "dtrain_reducescatter": (c_int, [c_char_p, c_void_p, c_void_p, c_int64, c_int, c_int, c_int, c_void_p,
                                         handle_p]),
        "dtrain_alltoall": (c_int, [c_char_p, c_void_p, c_void_p, c_int64, c_int, c_int, c_void_p, handle_p]),
        "dtrain_barrier": (c_int, [c_char_p, handle_p]),
        "dtrain_poll": (c_int, [c_int64, ctypes.POINTER(c_int)]),
        "dtrain_wait": (c_int, [c_int64]),
        # Added after ABI 1's first release: a binding checks hasattr before using them.
        "dtrain_wait_stream": (c_int, [c_int64, c_void_p]),
        "dtrain_timeline_start": (c_int, [c_char_p]),
        "dtrain_timeline_stop": (c_int, []),
        "dtrain_fusion_stats": (c_int, [ctypes.POINTER(c_int64), ctypes.POINTER(c_int64)]),
        "dtrain_abort": (c_int, [c_int]),
        "dtrain_wait_for": (c_int, [c_int64, c_double, ctypes.POINTER(c_int)]),
        "dtrain_join": (c_int, [ctypes.POINTER(c_int), handle_p]),
    }
    for name, (restype, argtypes) in signatures.items():
        if hasattr(lib, name):
            function = getattr(lib, name)
            function.restype, function.argtypes = restype, argtypes


lib, path = _load()


def has(function):
    """Whether this libdtrain.so exports `function` (the newer entry points are optional)."""
    return hasattr(lib, function)


def last_error():
    return lib.dtrain_last_error().decode(errors="replace")
