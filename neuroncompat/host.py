"""What this machine is, for the block ``neuroncompat doctor`` prints into a bug report.

A report that says "it fails on my machine" needs what ``accelerate env`` and ``torch.utils.collect_env``
give: the Python, the OS, the C++ compiler the simulated device is built with and the cache it is built
into, the torch build (CPU, CUDA or ROCm) and the library versions. Everything here is read without
importing torch or the Hugging Face libraries (package metadata; torch's ``version.py`` is read as text),
so the block is there even where torch does not import.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

from neuroncompat import environment

# In a bug report's order: the device stack, the libraries the patches target, then the codemod's parser.
LIBRARIES = (
    "torch",
    "torch-neuronx",
    "torch-xla",
    "transformers",
    "trl",
    "accelerate",
    "diffusers",
    "peft",
    "kernels",
    "libcst",
)


def version(dist: str) -> str | None:
    """The installed version of distribution ``dist``, None when it is not installed."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def python() -> str:
    return f"{platform.python_version()} ({platform.python_implementation()})"


def operating_system() -> str:
    return platform.platform()


def compiler() -> str:
    """The C++ compiler the simulated device is built with (``$CXX``, default ``c++``)."""
    return os.environ.get("CXX") or "c++"


def compiler_version() -> str | None:
    """The first line of ``$CXX --version`` with its path; None when there is no such compiler."""
    found = shutil.which(compiler())
    if found is None:
        return None
    try:
        done = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{found}: --version failed ({exc})"
    first = (done.stdout or done.stderr).strip().splitlines()
    return f"{first[0] if first else 'no version printed'} ({found})"


def cache_dir() -> Path:
    """Where the simulated device's native library is built (``NEURONCOMPAT_CACHE_DIR``'s default)."""
    root = environment.path("NEURONCOMPAT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "neuroncompat"
    )
    return Path(root)


def torch_build() -> str | None:
    """``CPU``, ``CUDA 12.8`` or ``ROCm 6.4``: which build of torch is installed (None: no torch).

    Read from torch's generated ``version.py`` rather than by importing torch: a broken torch install
    is one of the things a bug report must still describe.
    """
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        text = (Path(next(iter(spec.submodule_search_locations))) / "version.py").read_text(encoding="utf-8")
    except OSError:
        return "unknown (no torch/version.py)"
    return build_of(text)


def build_of(version_py: str) -> str:
    """The build a torch ``version.py`` describes (``cuda: Optional[str] = '12.8'`` in a CUDA build's)."""
    fields = dict(re.findall(r"^(cuda|hip)\s*(?::\s*[^=]+)?=\s*'([^']*)'", version_py, re.M))
    if fields.get("cuda"):
        return f"CUDA {fields['cuda']}"
    if fields.get("hip"):
        return f"ROCm {fields['hip']}"
    return "CPU"
