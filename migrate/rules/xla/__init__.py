"""NM601-NM610 PyTorch/XLA (legacy torch-neuronx) -> native TorchNeuron.

Rationale and examples: docs/rules.md (NM6xx); the facts: docs/gaps.md (PyTorch/XLA). TorchNeuron is
eager PyTorch on a `neuron` device: there is no graph to cut (`mark_step`), no device loader,
no `xla` process-group backend, and data parallelism is DDP/FSDP under `torchrun` instead of
`xmp.spawn`. Rank helpers become the environment torchrun sets (`RANK`, `LOCAL_RANK`,
`WORLD_SIZE`), which is also right in a single process. What has no native call (SPMD, XLA
FSDP, `mesh_reduce`) keeps its import and gets TODO NM918.

One module per concern: `names` (the torch_xla names the family knows, NM601), `state` (what it records per
file), `calls` (NM602, NM604, NM606, NM607, NM610: calls with a native counterpart), `loaders` (NM605: the
device loaders) and `statements` (NM603, NM608, NM609: what is rewritten or removed as a whole statement).
"""

from __future__ import annotations

from migrate.registry import Rule
from migrate.rules.xla import calls, loaders, names, state, statements
from migrate.rules.xla.names import _XLA_ENV

# the family's modules, in the order their hooks run (`migrate.rules.base.hooks_of`)
PARTS = (names, state, calls, loaders, statements)
RULES: tuple[Rule, ...] = (*names.RULES, *calls.RULES, *loaders.RULES, *statements.RULES)

__all__ = ["PARTS", "RULES", "_XLA_ENV"]
