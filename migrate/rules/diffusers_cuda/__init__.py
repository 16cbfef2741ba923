"""NM131-NM133, NM231, NM331-NM332 and TODOs NM931-NM933: diffusers scripts written for CUDA.

docs/rules.md (those ids); the upstream facts: docs/gaps.md, "Facts the codemod's diffusers rules rely on".
What the generic rules already do for a diffusers script stays with them (`.to("cuda")` NM102, fp16 NM202,
`torch_dtype=` NM203 with its diffusers gate, xformers NM208, `torch.compile` NM307, bitsandbytes NM209/NM210);
this family adds what only diffusers code does:

- every form of CUDA generator becomes a CPU one, which is what diffusers' `randn_tensor` samples from on
  Neuron (a neuron generator crashes it);
- CUDA attention backends become `"native"` (SDPA);
- `compile_repeated_blocks` gets the Neuron backend, and `pipe.vae = torch.compile(pipe.vae)` (which compiles
  nothing, pipelines call `vae.decode`) becomes the `decode` form;
- group offloading stops asking for CUDA streams, and cuDNN/TF32/inductor/`channels_last` tuning goes;
- sequential offload, quantization backends and pipeline calls whose shapes change in a loop get TODOs.

All of it only in files that import diffusers, except the `torch.Generator("cuda")` positional form, which
fails anywhere without CUDA (its keyword form is NM102's).

One module per concern: `generators` (NM131), `attention` (NM231), `compile` (NM331, NM332, NM133), `tuning`
(NM132), `loops` (TODO NM932) and `calls` (the call hook, which hands each call to them).
"""

from __future__ import annotations

from migrate.registry import Rule
from migrate.rules.diffusers_cuda import attention, calls, compile, generators, loops, tuning

# the family's modules, in the order their hooks run (`migrate.rules.base.hooks_of`)
PARTS = (generators, attention, compile, tuning, loops, calls)
RULES: tuple[Rule, ...] = (*generators.RULES, *attention.RULES, *compile.RULES, *tuning.RULES)

__all__ = ["PARTS", "RULES"]
