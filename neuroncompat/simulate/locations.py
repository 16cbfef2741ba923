"""Where a graph came from: the line that called the model, and the user's own line above it.

A recompile is fixed where the shapes are made, which is usually not the line that called the
model: ``transformers/generation/utils.py`` calls the model once per token, but the cache choice
is the user's ``model.generate(...)`` line. So each location is given twice:

- the *site*: the innermost caller outside torch and neuroncompat's own runtime (the simulator,
  the patches' wrappers, this recorder, the ``python -m neuroncompat`` runner);
- the *user* line: the innermost caller outside installed libraries and the standard library
  too, i.e. in the user's scripts (``None`` when the call came from library code only).

``neuroncompat.simulate.scenarios`` counts as user code: it stands in for a user's script.
Paths are shortened for reading: relative to site-packages (``transformers/trainer.py``) or to
the working directory.
"""

from __future__ import annotations

import os
import re
import site
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

import torch

# The neuroncompat package directory (this file is neuroncompat/simulate/locations.py), found without importing
# the package, which imports this module when the simulator starts.
_OWN = str(Path(__file__).resolve().parent.parent) + os.sep
_SCENARIOS = _OWN + os.path.join("simulate", "scenarios.py")
_TORCH = str(Path(torch.__file__).resolve().parent) + os.sep
_WRAPPERS = ("<frozen ", f"{os.sep}contextlib.py", f"{os.sep}functools.py", f"{os.sep}runpy.py")


def _library_dirs() -> tuple[str, ...]:
    """site-packages and the standard library, longest first so shortening picks the package."""
    paths = sysconfig.get_paths()
    dirs = {paths["stdlib"], paths["platstdlib"], paths["purelib"], paths["platlib"], *site.getsitepackages()}
    if site.ENABLE_USER_SITE:
        dirs.add(site.getusersitepackages())
    return tuple(sorted((str(Path(d).resolve()) + os.sep for d in dirs), key=len, reverse=True))


_LIBRARIES = _library_dirs()
_kinds: dict[str, tuple[bool, bool]] = {}


def _kind(filename: str) -> tuple[bool, bool]:
    """(internal, library) for a code file: internal frames are never a site, libraries never a user line."""
    kind = _kinds.get(filename)
    if kind is None:
        path = filename if filename.startswith("<") else os.path.realpath(filename)
        internal = (
            path.startswith(_TORCH)
            or (path.startswith(_OWN) and path != _SCENARIOS)
            or any(part in path for part in _WRAPPERS)
        )
        library = internal or path.startswith("<") or (path.startswith(_LIBRARIES) and path != _SCENARIOS)
        kind = _kinds[filename] = (internal, library)
    return kind


def is_library(filename: str) -> bool:
    """Whether ``filename`` is torch's, neuroncompat's runtime, an installed library or the
    standard library: never a user line."""
    return _kind(filename)[1]


def _describe(frame: FrameType) -> str:
    return f"{shorten(frame.f_code.co_filename)}:{frame.f_lineno} ({frame.f_code.co_name})"


def caller_in(frames: Sequence[tuple[str, int, str]]) -> tuple[str | None, str | None]:
    """:func:`caller` for a recorded stack, ``(filename, line, function)`` outermost first (a
    traceback's order: Dynamo's user stack of a graph break, an FX node's stack trace)."""
    site_at = user_at = None
    for filename, line, function in reversed(frames):
        internal, library = _kind(filename)
        where = f"{shorten(filename)}:{line} ({function})"
        if site_at is None and not internal:
            site_at = where
        if not library:
            return site_at, where
    return site_at, user_at


_TRACE_LINE = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)', re.MULTILINE)


def frames_in(stack_trace: str) -> list[tuple[str, int, str]]:
    """The frames of a formatted traceback (an FX node's ``meta["stack_trace"]``), outermost first."""
    return [(m["file"], int(m["line"]), m["function"]) for m in _TRACE_LINE.finditer(stack_trace)]


def caller(frame: FrameType | None) -> tuple[str | None, str | None]:
    """(site, user line) for the stack at ``frame``, as ``path:line (function)`` strings."""
    site_at = user_at = None
    while frame is not None and user_at is None:
        internal, library = _kind(frame.f_code.co_filename)
        if site_at is None and not internal:
            site_at = _describe(frame)
        if not library:
            user_at = _describe(frame)
        frame = frame.f_back
    return site_at, user_at


def current_caller() -> tuple[str | None, str | None]:
    """:func:`caller` for the stack of whoever calls this."""
    return caller(sys._getframe(1))


def shorten(path: str) -> str:
    """``path`` relative to site-packages, the standard library or the working directory."""
    if path.startswith("<"):
        return path
    resolved = os.path.realpath(path)
    for root in _LIBRARIES:
        if resolved.startswith(root):
            return resolved[len(root) :]
    cwd = os.getcwd() + os.sep
    return resolved[len(cwd) :] if resolved.startswith(cwd) else resolved


def shorten_location(location: str) -> str:
    """Shorten the path in a ``path:line (function)`` string (the simulator's trigger and code)."""
    path, sep, rest = location.rpartition(":")
    return f"{shorten(path)}{sep}{rest}" if sep and path else location
