"""The rank-local NeuronCore: where this process's model belongs.

Under torchrun each rank owns one core (``LOCAL_RANK``); in a single process it is the current
core. Spreading one rank's model over every visible core would collide with the other ranks,
which is why the shim never resolves "auto" to more than one core unless asked to.
"""

from __future__ import annotations

import os

# torch.neuron is registered at runtime (TorchNeuron, or the simulator), so torch's stubs lack it:
# its uses below carry `type: ignore[attr-defined]`.
import torch


def local_core_index() -> int:
    count = max(torch.neuron.device_count(), 1)  # type: ignore[attr-defined]
    local_rank = os.environ.get("LOCAL_RANK")
    if local_rank is not None and local_rank.isdigit():
        return int(local_rank) % count
    return torch.neuron.current_device()  # type: ignore[attr-defined]


def local_neuron_device() -> torch.device:
    return torch.device("neuron", local_core_index())


def neuron_available() -> bool:
    return hasattr(torch, "neuron") and torch.neuron.is_available()
