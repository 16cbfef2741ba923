"""NM501-NM508 Optimum Neuron training -> transformers / TRL / accelerate on TorchNeuron.

Moved whole into `fields` so that the split into one module per sub-topic keeps its history.
"""

from __future__ import annotations

from migrate.registry import Rule
from migrate.rules.optimum_training import fields
from migrate.rules.optimum_training.fields import ARGUMENT_FIELDS, DROPPED, lost_capability

PARTS = (fields,)  # one module for now: the split follows
RULES: tuple[Rule, ...] = fields.RULES

__all__ = ["PARTS", "RULES", "ARGUMENT_FIELDS", "DROPPED", "lost_capability"]
