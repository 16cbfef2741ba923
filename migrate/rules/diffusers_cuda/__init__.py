"""NM131-NM133, NM231, NM331-NM332 and TODOs NM931-NM933: diffusers scripts written for CUDA.

Moved whole into `generators` so that the split into one module per sub-topic keeps its history.
"""

from __future__ import annotations

from migrate.registry import Rule
from migrate.rules.diffusers_cuda import generators

PARTS = (generators,)  # one module for now: the split follows
RULES: tuple[Rule, ...] = generators.RULES

__all__ = ["PARTS", "RULES"]
