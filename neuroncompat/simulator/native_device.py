"""Build and load the simulated NeuronCore's C++ device guard, hooks and generator.

PyTorch asks the PrivateUse1 backend's C++ device guard for the current device whenever it meets
an index-less ``neuron`` (``torch.tensor(x, device="neuron")``, ``Tensor.to("neuron")``, the
``torch.accelerator`` calls, streams), and its C++ hooks for a new ``torch.Generator``. The guard
and hooks a Python backend can register (``torch._C._acc``) answer core 0, one device and "not
implemented". ``native/neuron_device.cpp`` implements both as TorchNeuron's C++ backend does, with
the current core kept per thread in C++ (as CUDA's is), so every one of those paths sees the core
``torch.neuron.set_device`` chose, with no Python wrapper in the way (Dynamo traces the real
torch functions).

The file is compiled once per torch build and source (a few seconds) into
``$NEURONCOMPAT_CACHE_DIR`` (default ``~/.cache/neuroncompat``) under a lock, so concurrent ranks
build it once; later processes load the cached library. It needs a C++17 compiler (``$CXX``,
default ``c++``) and torch's headers (every torch wheel ships them). Where it cannot be built,
:func:`load` raises :class:`NativeDeviceUnavailable` with the compiler's message.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

SOURCE = Path(__file__).with_name("native") / "neuron_device.cpp"
_library: ctypes.CDLL | None = None
_registered = False


class NativeDeviceUnavailable(RuntimeError):
    """The C++ part of the simulated device could not be built or loaded."""


def _cache_dir() -> Path:
    root = os.environ.get("NEURONCOMPAT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "neuroncompat"
    )
    return Path(root) / "native"


def _compile_command(output: Path) -> list[str]:
    torch_dir = Path(torch.__file__).parent
    torch_lib = torch_dir / "lib"
    return [
        os.environ.get("CXX") or "c++",
        "-O2",
        "-std=c++20",
        "-fPIC",
        "-shared",
        "-w",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
        f"-I{torch_dir / 'include'}",
        str(SOURCE),
        "-o",
        str(output),
        f"-L{torch_lib}",
        "-lc10",
        "-ltorch_cpu",
        f"-Wl,-rpath,{torch_lib}",
    ]


def _library_path() -> Path:
    """Where the build for this source, torch build and compiler lives."""
    key = hashlib.sha256()
    key.update(SOURCE.read_bytes())
    key.update(torch.__version__.encode())
    key.update(str(Path(torch.__file__).parent).encode())
    key.update(" ".join(_compile_command(Path("out"))).encode())
    return _cache_dir() / f"neuron_device-{key.hexdigest()[:16]}.so"


def _build(target: Path) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = open(target.with_suffix(".lock"), "w")  # held, locked, for the whole build below
    except OSError as exc:
        raise NativeDeviceUnavailable(
            f"cannot write the build of {SOURCE.name} to {target.parent} ({exc}); set NEURONCOMPAT_CACHE_DIR "
            "to a writable directory"
        ) from exc
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another rank may be building the same file
        if target.exists():
            return
        compiler = _compile_command(target)[0]
        if shutil.which(compiler) is None:
            raise NativeDeviceUnavailable(
                f"the simulated neuron device needs a C++ compiler to build {SOURCE.name} once "
                f"(looked for {compiler!r}; set CXX or install g++)"
            )
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            partial = Path(tmp) / target.name
            result = subprocess.run(_compile_command(partial), capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise NativeDeviceUnavailable(
                    f"building {SOURCE} failed (exit {result.returncode}):\n{result.stderr[-4000:]}"
                )
            os.replace(partial, target)


def load() -> ctypes.CDLL:
    """The loaded library (built first if needed); the same object on every call."""
    global _library
    if _library is None:
        path = _library_path()
        if not path.exists():
            _build(path)
        try:
            lib = ctypes.PyDLL(str(path))  # PyDLL keeps the GIL: each call is a few instructions
        except OSError as exc:
            raise NativeDeviceUnavailable(f"loading {path} failed: {exc}") from exc
        lib.neuroncompat_register.restype = ctypes.c_int
        lib.neuroncompat_configure.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.neuroncompat_set_available.argtypes = [ctypes.c_int]
        lib.neuroncompat_current_device.restype = ctypes.c_int
        lib.neuroncompat_set_current_device.argtypes = [ctypes.c_int]
        _library = lib
    return _library


def register() -> None:
    """Make the C++ guard and hooks PrivateUse1's (before anything else registers them)."""
    global _registered
    code = load().neuroncompat_register()
    _registered = code == 0
    if code == 1:
        raise RuntimeError("PrivateUse1 already has a device guard: another backend owns it in this process")
    if code == 2:
        raise RuntimeError("PrivateUse1 already has backend hooks: another backend owns it in this process")


def registered() -> bool:
    """Whether the C++ guard and hooks serve PrivateUse1 in this process."""
    return _registered
