"""dtrain from Python: libdtrain.so's C ABI through ctypes, and `dtrain.torch`, Horovod's PyTorch API
on it (a script written for `import horovod.torch as hvd` runs after `import dtrain.torch as hvd`).

Nothing here is compiled: the package finds libdtrain.so at import (dtrain/_library.py says where
it looks; DTRAIN_LIBRARY sets the path)."""

__version__ = "0.1.0"
