"""NM531-NM534 Optimum Neuron diffusion pipelines -> diffusers pipelines compiled on the neuron device.

Moved whole into `load` so that the split into one module per sub-topic keeps its history.
"""

from __future__ import annotations

from migrate.registry import Rule
from migrate.rules.optimum_diffusion import load

PARTS = (load,)  # one module for now: the split follows
RULES: tuple[Rule, ...] = load.RULES

__all__ = ["PARTS", "RULES"]
