"""``torch.histc`` of an integer tensor on the ``neuron`` device: the counts, as CUDA's kernel gives them.

transformers' default MoE experts implementation (``grouped_mm``, transformers/integrations/moe.py) counts
the tokens routed to each expert with ``torch.histc`` of the int32 expert ids on every device but the CPU
and MPS, because "CUDA only supports int input" under deterministic algorithms. The simulator runs an op
with the CPU's kernel, which has no integer ``histc``, so every MoE architecture (Mixtral, Qwen2/3-MoE,
Qwen3-Next, DeepSeek-V3, gpt-oss, Jamba, ...) failed its first forward on the simulated device.

What TorchNeuron does with an integer ``histc`` is not in the pages read (its per-operator table, regenerated
for each torch-neuronx release, was not readable here). The TorchNeuron launch measured that 89% of the 100
most used text-generation architectures run out of the box, which cannot hold if every MoE model of that list
stopped at this line; so the simulator runs it, as CUDA does: the histogram of the values as floats (exact for
integers below 2**24, which expert ids are), in the input's dtype. docs/simulator.md has the row and its
verdict ("unknown: runs, from the launch's measurement").
"""

from __future__ import annotations

import torch

_library: list[torch.library.Library] = []


def _histc(self: torch.Tensor, bins: int = 100, min: float = 0, max: float = 0) -> torch.Tensor:  # noqa: A002
    if self.is_floating_point():
        return torch.histc(self.cpu(), bins, min, max).to(self.device)
    return torch.histc(self.cpu().double(), bins, min, max).to(self.dtype).to(self.device)


def register() -> None:
    """Give ``aten::histc`` a ``neuron`` kernel, once per process (the dispatcher keeps it)."""
    if _library:
        return
    library = torch.library.Library("aten", "IMPL")
    library.impl("histc", _histc, "PrivateUse1")
    _library.append(library)
