"""Device values that name CUDA, and their NeuronCore equivalents.

``"cuda"`` -> ``"neuron:<current core>"`` (``"cuda"`` means the current GPU, which
``torch.cuda.set_device`` chose; the index is written out so no layer below has to resolve it),
``"cuda:N"`` -> ``"neuron:N"``, ``torch.device("cuda", N)`` -> ``torch.device("neuron", N)``. The
value keeps its kind (string or ``torch.device``), so code that formats or compares it sees what
it passed. Integers need nothing: torch resolves a bare ordinal to the current accelerator,
which is Neuron here. ``names_cuda`` is the hot-path test: two type checks and a prefix.
"""

from __future__ import annotations

import sys
from typing import Any

# torch.neuron is registered at runtime (TorchNeuron, or the simulator), so torch's stubs lack it:
# its uses below carry `type: ignore[attr-defined]`.
import torch

from neuroncompat.cuda import sites

_DEVICE = torch.device


def names_cuda(value: Any) -> bool:
    """Whether ``value`` is a device string or ``torch.device`` on CUDA."""
    kind = type(value)
    if kind is str:
        return value.startswith("cuda") and (len(value) == 4 or value[4] == ":")
    return kind is _DEVICE and value.type == "cuda"


def index_of(value: Any) -> int | None:
    """The device ordinal a CUDA-API argument names (None: the current device)."""
    if value is None:
        return None
    if isinstance(value, int):
        return value
    return _DEVICE(value).index


def to_neuron(value: Any) -> Any:
    """The NeuronCore ``value`` stands for, in the same form (see the module docstring)."""
    if type(value) is str:
        return "neuron" + value[4:] if len(value) > 4 else f"neuron:{torch.neuron.current_device()}"  # type: ignore[attr-defined]
    return _DEVICE("neuron", value.index if value.index is not None else torch.neuron.current_device())  # type: ignore[attr-defined]


def translate(value: Any, call: str, keyword: str | None = None, rule: str = "NM102", depth: int = 2) -> Any:
    """``to_neuron(value)``, logged at the user line that led to ``call``.

    ``depth`` counts frames above this function: 2 is the caller of the wrapper that called here.
    """
    neuron = to_neuron(value)
    named = f"{keyword}=" if keyword else ""
    sites.record(sys._getframe(depth), f"{call}({named}{_shown(value)})", f"{call}({named}{_shown(neuron)})", rule)
    return neuron


def _shown(value: Any) -> str:
    return repr(value) if type(value) is str else f"torch.device({str(value)!r})"
