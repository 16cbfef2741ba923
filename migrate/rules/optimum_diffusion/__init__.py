"""NM531-NM534 Optimum Neuron diffusion pipelines -> diffusers pipelines compiled on the neuron device.

docs/rules.md (NM531-NM534); the upstream facts: docs/gaps.md, "Facts the codemod's diffusers rules rely on".
Optimum compiled every component of a pipeline ahead of time for fixed shapes
(`NeuronStableDiffusionXLPipeline.from_pretrained(id, export=True, batch_size=, height=, width=, ...)`) and its
`__call__` silently replaces the caller's height and width by the compiled ones. Natively the diffusers class
of the same name (Optimum's own `auto_model_class`) loads the same checkpoint onto the NeuronCore and
`torch.compile` compiles the denoiser and `vae.decode` on the first call, for the shapes that call has:

- the load loses its export and compiler arguments, gains a dtype and `.to("neuron")`, and is followed by
  the compile lines (the UNet or transformer, its ControlNet, the decode);
- every later `pipe(...)` call gets the export `height`/`width` (and `num_images_per_prompt`, PixArt's
  `max_sequence_length`), so the native pipeline makes the images Optimum made and keeps one graph;
- LoRA, IP-adapter, ControlNet and `unet_id` arguments become the diffusers calls that load them;
- `tensor_parallel_size=T` (Flux) becomes diffusers' tensor parallelism, one process per core under
  `torchrun --nproc_per_node T`, text encoders on the CPU and the same noise on every rank.

One module per step: `state` (what a file's loads exported), `load` (NM531, the load itself), `adapters`
(NM533), `tensor_parallel` (NM534), `statements` (the lines a load adds around its statement) and `calls`
(NM532, the hooks on a migrated pipeline's calls, saves and factories).
"""

from __future__ import annotations

from migrate.registry import Rule
from migrate.rules.optimum_diffusion import adapters, calls, load, state, statements, tensor_parallel

# the family's modules, in the order their hooks run (`migrate.rules.base.hooks_of`)
PARTS = (state, adapters, load, tensor_parallel, statements, calls)
RULES: tuple[Rule, ...] = (*adapters.RULES, *load.RULES, *tensor_parallel.RULES, *calls.RULES)

__all__ = ["PARTS", "RULES"]
