"""pip install ./python: the package, plus libdtrain.so copied into dtrain/_lib/ when the build finds
one: $DTRAIN_LIBRARY (a file), else ../build/lib/ beside this directory. Without either, the package
looks for the library at import time (dtrain/_library.py)."""
import os
import pathlib
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

SONAME = "libdtrain.so.1"


def built_library():
    env = os.environ.get("DTRAIN_LIBRARY")
    if env:
        path = pathlib.Path(env)
        return path / SONAME if path.is_dir() else path
    path = pathlib.Path(__file__).resolve().parent.parent / "build" / "lib" / SONAME
    return path if path.exists() else None


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        library = built_library()
        if library is None:
            return
        if not library.exists():
            raise SystemExit(f"setup.py: DTRAIN_LIBRARY={library}: no such file")
        target = pathlib.Path(self.build_lib) / "dtrain" / "_lib"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(library.resolve(), target / SONAME)


setup(cmdclass={"build_py": BuildWithLibrary})
