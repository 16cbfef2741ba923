"""The rank-local NeuronCore: where this process's model belongs.

Under torchrun each rank owns one core (``LOCAL_RANK``); in a single process it is the current
core. Spreading one rank's model over every visible core would collide with the other ranks,
which is why the shim never resolves "auto" to more than one core unless asked to.
"""

from __future__ import annotations

import os

import torch


def local_core_index() -> int:
    count = max(torch.neuron.device_count(), 1)
    local_rank = os.environ.get("LOCAL_RANK")
    if local_rank is not None and local_rank.isdigit():
        return int(local_rank) % count
    return torch.neuron.current_device()


def local_neuron_device() -> torch.device:
    return torch.device("neuron", local_core_index())


def neuron_available() -> bool:
    return hasattr(torch, "neuron") and torch.neuron.is_available()
