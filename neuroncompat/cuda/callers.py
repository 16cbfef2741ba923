"""Who is calling: user code (redirected) or library code (told the truth).

The redirect's central rule (docs/cuda_redirect.md, "Who is redirected"). A call is *library*
code when the file of the frame that made it is

1. inside one of :data:`LIBRARY_PACKAGES` (torch and the Hugging Face stack, which know Neuron and
   must take their Neuron paths; neuroncompat itself), wherever they are installed;
2. else inside a path listed in ``NEURONCOMPAT_CUDA_USER_PATHS`` -> *user* (vendored code or a
   third-party package you want redirected, even from site-packages);
3. else inside the standard library, ``site-packages``/``dist-packages`` (any installed
   package: CUDA-aware libraries such as bitsandbytes must see that CUDA is absent);
4. or a code object with a synthetic name that Python or torch generates (``<frozen ...>``,
   ``<eval_with_key>`` from torch.fx, ``<torch_package...>``).

Everything else is *user* code: scripts, notebooks (``<ipython-input-...>`` and ipykernel
files), ``exec``'d strings (``<string>``), the REPL (``<stdin>``), tests.

The answer is cached per file name, so after the first call from a file it costs one dict
lookup; callers only ask when a CUDA name was actually passed or a ``torch.cuda`` function was
called.
"""

from __future__ import annotations

import importlib.util
import os
import site
import sys
import sysconfig
from types import FrameType

from neuroncompat import environment

USER_PATHS_ENV = "NEURONCOMPAT_CUDA_USER_PATHS"

# Packages that detect Neuron themselves (or are torch): they must see the real answers.
LIBRARY_PACKAGES = ("torch", "transformers", "accelerate", "trl", "peft", "neuroncompat")

# Code-object names Python and torch generate for their own code.
_GENERATED_PREFIXES = ("<frozen", "<eval_with_key>", "<torch_package", "<built-in")

_cache: dict[str, bool] = {}
_roots: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] | None = None


def _package_dir(name: str) -> str | None:
    """Where ``name`` is installed, found without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.realpath(list(spec.submodule_search_locations)[0])


def _installed_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    found = {paths.get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    found.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    found.add(site.getusersitepackages() if hasattr(site, "getusersitepackages") else None)
    found.update(p for p in sys.path if p.rstrip(os.sep).endswith(("site-packages", "dist-packages")))
    return tuple(sorted(os.path.realpath(p) for p in found if p))


def _user_paths() -> tuple[str, ...]:
    return tuple(os.path.realpath(p) for p in environment.paths(USER_PATHS_ENV))


def _load_roots() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    global _roots
    if _roots is None:
        libraries = tuple(d for d in (_package_dir(name) for name in LIBRARY_PACKAGES) if d)
        _roots = (libraries, _user_paths(), _installed_dirs())
    return _roots


def reset() -> None:
    """Forget cached answers (after changing ``NEURONCOMPAT_CUDA_USER_PATHS``)."""
    global _roots
    _roots = None
    _cache.clear()


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root + os.sep) for root in roots)


def _classify(filename: str) -> bool:
    if filename.startswith("<"):
        return not filename.startswith(_GENERATED_PREFIXES)
    libraries, user_paths, installed = _load_roots()
    path = os.path.realpath(filename)
    if _inside(path, libraries):
        return False
    if _inside(path, user_paths):
        return True
    return not _inside(path, installed)


def is_user_file(filename: str) -> bool:
    """Whether code in ``filename`` is user code (see the module docstring for the rule)."""
    answer = _cache.get(filename)
    if answer is None:
        answer = _cache[filename] = _classify(filename)
    return answer


def is_user_frame(frame: FrameType) -> bool:
    return is_user_file(frame.f_code.co_filename)


def user_frame(frame: FrameType | None) -> FrameType | None:
    """The innermost user frame at or above ``frame``: the line a log entry points at."""
    while frame is not None:
        if is_user_file(frame.f_code.co_filename):
            return frame
        frame = frame.f_back
    return None
