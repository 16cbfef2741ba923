"""Which torch-neuronx this machine has, and whether Neuron is usable, without importing torch.

Four cases matter to users, and each needs different advice:
- ``native``: TorchNeuron (torch-neuronx ≥ 2.13.3, from the AWS Neuron repository): the
  ``neuron`` device is real and the shim applies.
- ``legacy-xla``: the older torch-neuronx built on torch_xla (Optimum Neuron's stack): the
  native patches do not apply; ``neuron-migrate`` ports such scripts.
- ``placeholder``: PyPI's ``torch-neuronx``, which raises ImportError ("WRONG PACKAGE") on
  import: reported, never crashed on.
- ``simulated``: ``neuroncompat.simulator`` is on.
Detection reads package metadata and the module's source text only, so it costs a few
milliseconds and works before torch is imported.
"""

from __future__ import annotations

import sys
from collections import namedtuple

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

PLACEHOLDER_MARKER = "WRONG PACKAGE"


class Detection(namedtuple("Detection", ["kind", "version", "reason"])):
    """What was found (``kind``, ``version`` or None) and a sentence saying why (``reason``).
    Immutable; a named tuple rather than a dataclass because ``import neuroncompat`` runs this
    in every migrated script and ``dataclasses`` imports ``inspect``."""

    __slots__ = ()

    @property
    def real_hardware_stack(self) -> bool:
        """A torch-neuronx that drives real NeuronCores (native or legacy XLA)."""
        return self.kind in ("native", "legacy-xla")


def _requires_torch_xla() -> bool:
    from importlib import metadata

    try:
        requires = metadata.requires("torch-neuronx") or []
    except metadata.PackageNotFoundError:
        return False
    return any(r.replace("_", "-").lower().startswith("torch-xla") for r in requires)


def _find_top_level_spec(name: str) -> ModuleSpec | None:
    """``importlib.util.find_spec(name)`` for a top-level module: its ``__spec__`` if imported, else
    each finder on ``sys.meta_path`` asked in turn, as the import system does. ``importlib.util``
    itself is not imported: it brings ``contextlib`` and ``warnings`` into every script that
    imports neuroncompat."""
    if name in sys.modules:
        return getattr(sys.modules[name], "__spec__", None)
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        spec = find_spec(name, None) if find_spec is not None else None
        if spec is not None:
            return spec
    return None


def detect_torch_neuronx() -> Detection:
    """Classify the ``torch_neuronx`` module that ``import torch_neuronx`` would load."""
    loaded = sys.modules.get("torch_neuronx")
    if loaded is not None and getattr(loaded, "__simulated__", False):
        return Detection("simulated", getattr(loaded, "__version__", None), "neuroncompat.simulator is enabled")
    try:
        spec = _find_top_level_spec("torch_neuronx")
    except (ImportError, ValueError) as exc:
        return Detection("absent", None, f"torch_neuronx cannot be located: {exc}")
    if spec is None:
        return Detection("absent", None, "torch_neuronx is not installed")
    from importlib import metadata  # only now: it costs ~15 ms, and most machines stop above

    try:
        version: str | None = metadata.version("torch-neuronx")
    except metadata.PackageNotFoundError:
        version = None
    origin = spec.origin or ""
    if origin.endswith(".py"):
        try:
            with open(origin, encoding="utf-8", errors="replace") as f:
                head = f.read(20000)
        except OSError:
            head = ""
        if PLACEHOLDER_MARKER in head:
            return Detection(
                "placeholder",
                version,
                "the installed torch-neuronx is the PyPI placeholder, which raises ImportError: "
                "install the real one from the AWS Neuron repository "
                "(pip install torch-neuronx --extra-index-url https://pip.repos.neuron.amazonaws.com)",
            )
    if _requires_torch_xla():
        return Detection(
            "legacy-xla",
            version,
            "torch-neuronx depends on torch-xla: this is the legacy XLA stack, not TorchNeuron; "
            "port scripts with neuron-migrate and install TorchNeuron (torch-neuronx >= 2.13.3)",
        )
    return Detection("native", version, f"TorchNeuron torch-neuronx {version or '(unknown version)'} is installed")


# Library checks that cache "is Neuron available" for the life of the process.
_AVAILABILITY_CACHES = (
    ("transformers.utils.import_utils", "is_torch_neuron_available"),
    ("accelerate.utils.imports", "is_neuron_available"),
)


def clear_availability_caches() -> None:
    """Make transformers and accelerate look for Neuron again (their checks are ``lru_cache``d).

    Needed whenever the device appears after one of them already answered: torch-neuronx loaded
    late, or the simulator switched on or off. Libraries not imported yet are left alone.
    """
    for module_name, func_name in _AVAILABILITY_CACHES:
        func = getattr(sys.modules.get(module_name), func_name, None)
        if func is not None and hasattr(func, "cache_clear"):
            func.cache_clear()
