"""NM511-NM515 Optimum Neuron inference -> transformers models and pipelines on the neuron device.

Moved whole into `loads` so that the split into one module per sub-topic keeps its history.
"""

from __future__ import annotations

from migrate.registry import Rule
from migrate.rules.optimum_inference import loads
from migrate.rules.optimum_inference.loads import inline_splats

PARTS = (loads,)  # one module for now: the split follows
RULES: tuple[Rule, ...] = loads.RULES

__all__ = ["PARTS", "RULES", "inline_splats"]
