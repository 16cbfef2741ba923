"""neuroncompat: run Hugging Face scripts natively on AWS Trainium (TorchNeuron).

Put ``import neuroncompat`` first in a script (or run ``python -m neuroncompat train.py``): on
a Neuron host it fixes the known gaps between transformers/TRL/accelerate and TorchNeuron; off
Neuron it changes nothing. It imports neither torch nor transformers itself: patches attach
when those libraries are imported. See ``neuroncompat doctor`` for what applies here.
"""

from __future__ import annotations

import sys as _sys

from neuroncompat import shim as _shim
from neuroncompat.shim import PatchStatus, apply, revert, status

__all__ = ["apply", "revert", "status", "PatchStatus", "PatchError", "__version__"]
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """``neuroncompat.PatchError`` on first use: ``neuroncompat.patch`` imports ``logging``, which
    ``import neuroncompat`` avoids off Neuron."""
    if name == "PatchError":
        from neuroncompat.patch import PatchError

        return PatchError
    raise AttributeError(f"module 'neuroncompat' has no attribute {name!r}")


def _imported_by_the_simulator_autoload() -> bool:
    """``import torch`` with ``NEURONCOMPAT_SIMULATE`` set loads the simulated device only, not the shim."""
    autoload = _sys.modules.get("neuroncompat_autoload")
    return bool(getattr(autoload, "ENABLING", False))


# Submodules the simulator autoload already loaded (under the package object it then dropped) are bound as
# attributes again, as a first import would have bound them. Only after an autoload: this walks sys.modules.
if "neuroncompat.simulator" in _sys.modules:
    for _name, _module in list(_sys.modules.items()):
        if _name.startswith("neuroncompat.") and _name.count(".") == 1:
            globals().setdefault(_name.split(".", 1)[1], _module)

try:
    if not _imported_by_the_simulator_autoload():
        _shim.start()  # apply() without building its status: off Neuron that would import every patch
except Exception as stop:
    from neuroncompat.environment import SettingError
    from neuroncompat.patch import PatchError

    if isinstance(stop, PatchError):
        # A patch stopped the run on purpose: exit with its message alone (status 1), not a traceback
        # through the import machinery. ``neuroncompat.apply()`` called directly raises PatchError.
        raise SystemExit(str(stop)) from None
    if isinstance(stop, SettingError):  # a mistyped NEURONCOMPAT_* value: the user's to fix, not a crash
        raise SystemExit(f"neuroncompat: {stop}") from None
    raise
