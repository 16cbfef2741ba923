"""NM501-NM508 Optimum Neuron training -> transformers / TRL / accelerate on TorchNeuron.

docs/gaps.md (Optimum Neuron facts) and docs/rules.md (NM5xx), across the three API generations (<=0.0.x,
0.1-0.3, 0.4.x). optimum-neuron pins transformers 4.57 and imports torch_xla at import time,
so it cannot be installed next to the native stack: every name is swapped for its native
class (the import rewrite is `legacy_imports.py`'s), and what only Optimum understood (NxD
parallelism fields, ZeRO-1 flags, the custom training models' `trn_config` argument) is
dropped, moved to a `DistributedConfig`, or marked with an NM91x TODO.

One module per concern: `names` (NM501/NM502, the classes swapped for their native ones), `fields` (NM503, the
training-arguments fields only Optimum had), `parallel` (NM505/NM506, tensor parallelism and the training model
classes), `calls` (the call hook, NM504's accelerator), `lazy_load` (NM507), `utils` (NM508), and `state`, what
the hooks share about a file.
"""

from __future__ import annotations

from migrate.registry import Rule
from migrate.rules.optimum_training import calls, fields, lazy_load, names, parallel, state, utils
from migrate.rules.optimum_training.fields import ARGUMENT_FIELDS, DROPPED, lost_capability

# the family's modules, in the order their hooks run (`migrate.rules.base.hooks_of`)
PARTS = (state, names, fields, parallel, calls, lazy_load, utils)
RULES: tuple[Rule, ...] = (*names.RULES, *fields.RULES, *parallel.RULES, *calls.RULES, *lazy_load.RULES, *utils.RULES)

__all__ = ["PARTS", "RULES", "ARGUMENT_FIELDS", "DROPPED", "lost_capability"]
