"""NM7xx version drift: arguments removed or renamed in transformers 5 and TRL 1.x.

Moved whole into `bindings` so that the split into one module per sub-topic keeps its history.
"""

from __future__ import annotations

from migrate.registry import Rule
from migrate.rules.drift import bindings
from migrate.rules.drift.bindings import (
    FIELDS,
    MODEL_CONFIG_FIELDS,
    MODEL_CONFIG_MOVED,
    REMOVED_TRL_API,
    TRAINER_KWARGS_MOVED,
    Removed,
)

PARTS = (bindings,)  # one module for now: the split follows
RULES: tuple[Rule, ...] = bindings.RULES

__all__ = [
    "PARTS",
    "RULES",
    "FIELDS",
    "Removed",
    "TRAINER_KWARGS_MOVED",
    "MODEL_CONFIG_FIELDS",
    "MODEL_CONFIG_MOVED",
    "REMOVED_TRL_API",
]
