"""NM511-NM515 Optimum Neuron inference -> transformers models and pipelines on the neuron device.

docs/gaps.md (Optimum Neuron facts) and docs/rules.md (NM511-NM515). Optimum compiled a model ahead of time for
fixed shapes (`export=True, batch_size=, sequence_length=` up to 0.3; `get_neuron_config()` +
`export()` in 0.4.x) and ran it from the CPU side. TorchNeuron compiles on first use: the
native model is loaded onto the NeuronCore with `device_map="neuron"` in bf16 (the NxD
default), the export kwargs go, and the export shapes survive as what keeps graphs static: a
static KV cache of `max_cache_len = sequence_length` for decoders, inputs padded to
`sequence_length` for encoders. Decoder inputs stay on CPU (`generate()` moves them); encoder
inputs move to the model's device, since a native forward does not take CPU tensors.

One module per concern: `state` (what a file's exports fixed), `classes` (NM511, the model classes), `export`
(reading and dropping the export arguments), `loads` (NM513, NM515: the call hook, Optimum's export API and
pipelines), `encoders` (NM514) and `shapes` (NM512: the export shapes kept static).
"""

from __future__ import annotations

from migrate.registry import Rule
from migrate.rules.optimum_inference import classes, encoders, export, loads, shapes, state
from migrate.rules.optimum_inference.loads import inline_splats

# the family's modules, in the order their hooks run (`migrate.rules.base.hooks_of`)
PARTS = (state, classes, export, loads, encoders, shapes)
RULES: tuple[Rule, ...] = (*classes.RULES, *loads.RULES, *encoders.RULES, *shapes.RULES)

__all__ = ["PARTS", "RULES", "inline_splats"]
