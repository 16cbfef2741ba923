"""neuroncompat: run Hugging Face scripts natively on AWS Trainium (TorchNeuron).

Put ``import neuroncompat`` first in a script (or run ``python -m neuroncompat train.py``): on
a Neuron host it fixes the known gaps between transformers/TRL/accelerate and TorchNeuron; off
Neuron it changes nothing. It imports neither torch nor transformers itself: patches attach
when those libraries are imported. See ``neuroncompat doctor`` for what applies here.
"""

from __future__ import annotations

from neuroncompat import shim as _shim
from neuroncompat.shim import PatchStatus, apply, revert, status

__all__ = ["apply", "revert", "status", "PatchStatus", "__version__"]
__version__ = "0.1.0"

_shim.start()  # apply() without building its status: off Neuron that would import every patch
