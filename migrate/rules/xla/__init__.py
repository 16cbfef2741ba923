"""NM601-NM610 PyTorch/XLA (legacy torch-neuronx) -> native TorchNeuron.

Moved whole into `statements` so that the split into one module per sub-topic keeps its history.
"""

from __future__ import annotations

from migrate.registry import Rule
from migrate.rules.xla import statements
from migrate.rules.xla.statements import _XLA_ENV

PARTS = (statements,)  # one module for now: the split follows
RULES: tuple[Rule, ...] = statements.RULES

__all__ = ["PARTS", "RULES", "_XLA_ENV"]
