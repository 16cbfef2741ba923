"""Which ops check their tensors' devices, as torch's own source says, for the simulated device.

On CUDA, torchgen generates a device check into every kernel wrapper: all positional and
``out=`` tensors on one device, a 0-dim CPU tensor included. An op whose entry in
``native_functions.yaml`` says ``device_check: NoCheck`` skips it and its kernel checks for itself
(TensorIterator takes one 0-dim CPU input as a scalar; ``index`` takes CPU indices; copies take
any pair of devices). The simulator runs every op as a CPU kernel over host aliases, where those
kernels see only CPU tensors, so the C++ backend applies the same checks before the kernel and
needs the NoCheck names: this module reads them from the ``native_functions.yaml`` every torch
wheel ships (in ``torchgen``), the file torch's own kernels were generated from, rather than from
a list kept here that could drift from the installed torch.
"""

from __future__ import annotations

import ctypes
import re
from functools import cache
from pathlib import Path

_FUNC = re.compile(r"^- func: ([A-Za-z0-9_.]+)\(")
_NO_CHECK = re.compile(r"^\s+device_check:\s*NoCheck\b")


def native_functions_yaml() -> Path:
    """The ``native_functions.yaml`` of the installed torch (shipped in its ``torchgen`` package)."""
    import torchgen

    path = Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"
    if not path.is_file():
        raise RuntimeError(
            f"the simulated neuron device reads which ops check devices from {path}, which is missing: "
            "reinstall torch (every torch wheel ships it in torchgen)"
        )
    return path


def parse_unchecked(text: str) -> frozenset[str]:
    """The ``name.overload`` of each entry of ``text`` (a native_functions.yaml) with NoCheck."""
    found: set[str] = set()
    current: str | None = None
    for line in text.splitlines():
        func = _FUNC.match(line)
        if func is not None:
            current = func.group(1)
        elif current is not None and _NO_CHECK.match(line):
            found.add(current)
    return frozenset(found)


@cache
def unchecked_ops() -> frozenset[str]:
    """The installed torch's ops with ``device_check: NoCheck`` (``add.Tensor``, ``copy_``, ...)."""
    return parse_unchecked(native_functions_yaml().read_text(encoding="utf-8"))


def install(library: ctypes.CDLL) -> None:
    """Give the C++ backend the NoCheck ops, before its first op."""
    library.neuroncompat_set_unchecked_ops.argtypes = [ctypes.c_char_p]
    library.neuroncompat_set_unchecked_ops(",".join(sorted(unchecked_ops())).encode())
