"""NM1xx device placement: device sources, comparisons, `device_map`, ordinals, pipelines.

Rationale and examples per rule: docs/rules.md (NM1xx). Only device *sources* are
rewritten (literals in device positions, `device = ...`, defaults, `torch.device(...)`,
`device_map`); uses such as `.to(device)` stay, so diffs stay small.

One module per concern: `literals` (NM102, NM106: what a device value and a rank are), `values` (NM105 and the
settings that carry a device: keywords, assignments, defaults), `variables` (NM102 through a variable),
`methods` (NM101, NM107: `.cuda()`, `.to(...)`, data-parallel wrappers, pipelines) and `comparisons` (NM103).
"""

from __future__ import annotations

from migrate.registry import Rule
from migrate.rules.device import comparisons, literals, methods, values, variables
from migrate.rules.device.literals import is_device_side, is_rank, neuron_text, rank_core

# the family's modules, in the order their hooks run (`migrate.rules.base.hooks_of`)
PARTS = (literals, values, variables, methods, comparisons)
RULES: tuple[Rule, ...] = (*literals.RULES, *values.RULES, *methods.RULES, *comparisons.RULES)

__all__ = ["PARTS", "RULES", "neuron_text", "is_rank", "rank_core", "is_device_side"]
