"""Build and load the simulated NeuronCore: the C++ PrivateUse1 backend in ``native/`` (its ``.cpp`` files).

TorchNeuron is a C++ PrivateUse1 backend; so is the simulator. Its tensors are plain
``torch.Tensor`` objects on ``neuron:N`` whose storage is host memory from the backend's own
allocator, and its ops run the CPU's kernels on that memory (see the C++ file's header), so a
simulated step costs about what a CPU step costs and computes the same numbers. PyTorch finds
everything there: the device guard (the current core, per thread), the hooks (availability, core
count, generators, pinned memory), the allocator (``torch.accelerator.memory_*``), the kernels and
the autocast kernels.

The sources are compiled once per torch build and source into ``$NEURONCOMPAT_CACHE_DIR`` (default
``~/.cache/neuroncompat``) under a lock, so concurrent ranks build it once; later processes load the cached
library. Each ``.cpp`` (one capability each, as torch_openreg lays out its backend; ``native/neuron_device.h``
lists them) is compiled on its own, as many at once as the process may use CPUs, then linked: on 2 cores about
as long as the single file it replaced (docs/simulator.md gives the figures). It needs a C++20 compiler
(``$CXX``, default ``c++``) and torch's headers (every torch wheel ships them). Where it cannot be built,
:func:`load` raises :class:`NativeDeviceUnavailable` saying how to get a compiler.

The cache key covers every file in ``native/`` (each ``.cpp`` is compiled, the headers they include count
too) and every compile and link command, so adding or splitting a source file needs no change here. Each build
writes its size and SHA-256 beside it (``<library>.digest``), and every load checks them first: a library
truncated by a full disk or an interrupted copy made ``dlopen`` crash the process with SIGBUS (no message) or
fail for good. A library that does not match, or has no digest, is rebuilt under the same lock, with one line
on stderr saying so. Each file's object is kept too (``objects/``, keyed on its source, the headers, torch and its
command): a rebuild compiles only the files that changed, and relinks.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from neuroncompat import host

NATIVE = Path(__file__).with_name("native")
_library: ctypes.CDLL | None = None


def _sources() -> list[Path]:
    """Every file the build reads from ``native/``, in a fixed order (the ``.cpp`` files are compiled)."""
    return sorted(path for path in NATIVE.iterdir() if path.is_file())


class NativeDeviceUnavailable(RuntimeError):
    """The C++ part of the simulated device could not be built or loaded."""


def _cache_dir() -> Path:
    return host.cache_dir() / "native"


# The longest compile first (CUDA's autocast lists expand to hundreds of kernels, ~20 s): it then runs beside
# the others instead of after them, which on 2 cores is most of the build's wall time.
_LONGEST_FIRST = ("autocast.cpp",)


def _units() -> list[Path]:
    """The ``.cpp`` files, in the order their compiles start."""
    units = [path for path in _sources() if path.suffix == ".cpp"]
    return sorted(units, key=lambda path: (path.name not in _LONGEST_FIRST, path.name))


def _compile_command(unit: Path, build: Path) -> list[str]:
    """Compile one ``.cpp`` of ``native/`` to ``build/<name>.o``."""
    torch_dir = Path(torch.__file__).parent
    return [
        host.compiler(),
        "-O2",
        "-std=c++20",
        "-fPIC",
        "-w",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
        # each op's own header (ATen/ops/...), as torch's own sources, rather than every op's declarations
        "-DAT_PER_OPERATOR_HEADERS",
        f"-I{torch_dir / 'include'}",
        "-c",
        str(unit),
        "-o",
        str(build / f"{unit.stem}.o"),
    ]


def _link_command(objects: list[Path], output: Path) -> list[str]:
    torch_lib = Path(torch.__file__).parent / "lib"
    return [
        host.compiler(),
        "-shared",
        *(str(path) for path in objects),
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
    for path in _sources():
        key.update(path.name.encode() + b"\0" + path.read_bytes())
    key.update(torch.__version__.encode())
    key.update(str(Path(torch.__file__).parent).encode())
    for unit in _units():
        key.update(" ".join(_compile_command(unit, Path("build"))).encode())
    key.update(" ".join(_link_command([Path(f"build/{unit.stem}.o") for unit in _units()], Path("out"))).encode())
    return _cache_dir() / f"neuron_device-{key.hexdigest()[:16]}.so"


def _parallel_jobs() -> int:
    """How many compiles to run at once: the CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS has no sched_getaffinity
        return os.cpu_count() or 1


def _object_paths() -> dict[Path, Path]:
    """Where each ``.cpp``'s compiled object is kept, keyed on its source, every header, torch and its compile
    command (the headers and torch hashed once for all the files).

    A rebuild (a damaged library, a ``.cpp`` edited) then compiles only what changed: relinking costs about a
    second where compiling every file costs about 70 s of CPU.
    """
    shared = hashlib.sha256()
    for header in (path for path in _sources() if path.suffix != ".cpp"):
        shared.update(header.name.encode() + b"\0" + header.read_bytes())
    shared.update(torch.__version__.encode() + str(Path(torch.__file__).parent).encode())
    paths = {}
    for unit in _units():
        key = shared.copy()
        key.update(unit.read_bytes())
        key.update(" ".join(_compile_command(unit, Path("build"))).encode())
        paths[unit] = _cache_dir() / "objects" / f"{unit.stem}-{key.hexdigest()[:16]}.o"
    return paths


def _compile(build: Path, output: Path) -> None:
    """Compile every ``.cpp`` whose object is not kept yet (in parallel, each moved into the kept objects as it
    is made), then link the kept objects into ``output``. Should the link fail on kept objects, they are made
    again once.

    ``build`` is on the cache's file system (``_build`` makes it beside the library), so an object is kept by a
    rename: atomic, and a link in another process reading the previous file keeps reading it.
    """
    kept = _object_paths()

    def run(command: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, capture_output=True, text=True, check=False)

    def make(unit: Path) -> subprocess.CompletedProcess[str]:
        result = run(_compile_command(unit, build))
        if result.returncode == 0:
            kept[unit].parent.mkdir(parents=True, exist_ok=True)
            os.replace(build / f"{unit.stem}.o", kept[unit])
        return result

    units = _units()
    for fresh in (False, True):
        todo = [unit for unit in units if fresh or not kept[unit].exists()]
        if todo:
            with ThreadPoolExecutor(max_workers=min(_parallel_jobs(), len(todo))) as pool:
                results = list(pool.map(make, todo))
            for unit, result in zip(todo, results):
                if result.returncode != 0:
                    raise NativeDeviceUnavailable(
                        f"building {NATIVE} failed: compiling {unit.name} (exit {result.returncode}):\n"
                        f"{result.stderr[-4000:]}"
                    )
        result = run(_link_command([kept[unit] for unit in units], output))
        if result.returncode == 0:
            return
        if len(todo) == len(units):
            break
    raise NativeDeviceUnavailable(
        f"building {NATIVE} failed: linking (exit {result.returncode}):\n{result.stderr[-4000:]}"
    )


def _digest_path(library: Path) -> Path:
    return library.with_name(library.name + ".digest")


def _digest(path: Path) -> dict[str, object]:
    data = path.read_bytes()
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def damage(library: Path) -> str | None:
    """Why the cached ``library`` must not be loaded (None: it is the build its digest records)."""
    try:
        recorded = json.loads(_digest_path(library).read_text())
    except FileNotFoundError:
        return "it has no digest file" if library.exists() else "not built yet"
    except (OSError, ValueError) as exc:
        return f"its digest file cannot be read ({exc})"
    try:
        found = _digest(library)
    except FileNotFoundError:
        return "not built yet"
    except OSError as exc:
        return f"it cannot be read ({exc})"
    if found["size"] != recorded.get("size"):
        return f"it is {found['size']} bytes, the build wrote {recorded.get('size')}"
    if found["sha256"] != recorded.get("sha256"):
        return "its SHA-256 differs from the build's"
    return None


def _build(target: Path) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = open(target.with_suffix(".lock"), "w")  # held, locked, for the whole build below
    except OSError as exc:
        raise NativeDeviceUnavailable(
            f"cannot write the build of {NATIVE.name}/ to {target.parent} ({exc}); set NEURONCOMPAT_CACHE_DIR "
            "to a writable directory"
        ) from exc
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another rank may be building the same file
        why = damage(target)
        if why is None:
            return  # built (or rebuilt) by another process meanwhile
        if target.exists() or _digest_path(target).exists():
            print(
                f"neuroncompat: the cached simulator library {target} is damaged ({why}); rebuilding it",
                file=sys.stderr,
            )
        compiler = host.compiler()
        if shutil.which(compiler) is None:
            raise NativeDeviceUnavailable(
                f"the simulated neuron device needs a C++20 compiler to build {NATIVE.name}/ once "
                f"(looked for {compiler!r}): install one (Debian/Ubuntu: apt-get install g++; Fedora: dnf "
                "install gcc-c++; macOS: xcode-select --install) or point CXX at it"
            )
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            partial = Path(tmp) / target.name
            _compile(Path(tmp), partial)
            # the digest first: a reader that sees the new digest beside the old library rebuilds under the lock
            digest = Path(tmp) / "digest"
            digest.write_text(json.dumps(_digest(partial)))
            os.replace(digest, _digest_path(target))
            os.replace(partial, target)


def load() -> ctypes.CDLL:
    """The loaded library (built first if needed); the same object on every call."""
    global _library
    if _library is None:
        path = _library_path()
        if damage(path) is not None:
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
        lib.neuroncompat_configure_memory.argtypes = [ctypes.c_int64, ctypes.c_int64]
        lib.neuroncompat_set_observer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        _library = lib
    return _library


def register() -> None:
    """Make the C++ guard, hooks and allocator PrivateUse1's (before anything else registers them)."""
    code = load().neuroncompat_register()
    if code == 1:
        raise RuntimeError("PrivateUse1 already has a device guard: another backend owns it in this process")
    if code == 2:
        raise RuntimeError("PrivateUse1 already has backend hooks: another backend owns it in this process")
