"""NM7xx version drift: arguments removed or renamed in transformers 5 and TRL 1.x.

Rationale per rule: docs/rules.md (NM7xx). Each was checked against the installed transformers 5.23.0 / trl 1.16.0
(`dataclasses.fields(TrainingArguments)`, the trainers' signatures): the old names are a
TypeError there, so an old script fails before any Neuron issue. Only calls of
`*TrainingArguments`, `*Config` (TRL configs) and `*Trainer` are touched; diffusers'
`ProjectConfiguration(logging_dir=...)` and argparse options keep their names.

A script that reads such a field (`if not training_args.overwrite_output_dir:`) fails with
AttributeError instead; NM709/NM921 handle the reads on names known to hold training arguments.
`FIELDS` is the one table of these fields: the launch-line rule NM817 and the recipe-key rule NM808
read it too.

One module per concern: `fields` (the table of removed fields), `keywords` (NM701-NM708 and NM929: the
constructors' keywords), `trl_api` (NM924: TRL helpers removed in 1.x), `bindings` (which names hold training
arguments) and `reads` (NM709, NM921, NM927: reads of removed fields, and a script's own `torch_dtype` field).
"""

from __future__ import annotations

from migrate.registry import Rule
from migrate.rules.drift import bindings, fields, keywords, reads, trl_api
from migrate.rules.drift.fields import FIELDS, Removed
from migrate.rules.drift.keywords import TRAINER_KWARGS_MOVED
from migrate.rules.drift.reads import MODEL_CONFIG_FIELDS, MODEL_CONFIG_MOVED
from migrate.rules.drift.trl_api import REMOVED_TRL_API

# the family's modules, in the order their hooks run (`migrate.rules.base.hooks_of`)
PARTS = (fields, trl_api, keywords, bindings, reads)
RULES: tuple[Rule, ...] = (*keywords.RULES, *reads.RULES)

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
