"""NM1xx device placement: device sources, comparisons, `device_map`, ordinals, pipelines.

Moved whole into `methods` so that the split into one module per sub-topic keeps its history.
"""

from __future__ import annotations

from migrate.registry import Rule
from migrate.rules.device import methods
from migrate.rules.device.methods import is_device_side, is_rank, neuron_text, rank_core

PARTS = (methods,)  # one module for now: the split follows
RULES: tuple[Rule, ...] = methods.RULES

__all__ = ["PARTS", "RULES", "neuron_text", "is_rank", "rank_core", "is_device_side"]
