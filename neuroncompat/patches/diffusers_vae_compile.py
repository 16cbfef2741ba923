"""``diffusers_vae_compile``: compiling a diffusers autoencoder also compiles the ``decode``/``encode`` pipelines call.

Gap (docs/gaps.md#diffusers_vae_compile): ``pipe.vae = torch.compile(pipe.vae, backend="neuron")`` (done by
diffusers' own Neuron tests, in its git tree: tests/pipelines/pixart_alpha/test_pixart.py:411,
tests/pipelines/flux2/test_pipeline_flux2_klein.py:271) compiles the module's ``forward`` only. Pipelines never
call the VAE's ``forward``: they call ``self.vae.decode(latents / scaling_factor)`` (e.g.
diffusers/pipelines/stable_diffusion/pipeline_stable_diffusion.py:1085), and training scripts call
``vae.encode(pixels)``. ``OptimizedModule.__getattr__`` (torch/_dynamo/eval_frame.py:597-600) hands those
methods over from the original module uncompiled, so the decode runs eagerly, op by op, on every call:
measured on the simulator, 0 decode graphs. ``vae.compile()`` (torch/nn/modules/module.py:3053) compiles only
``_call_impl`` and leaves them eager too.

Fix: when ``torch.compile`` is given a diffusers model that has ``decode`` (``AutoencoderKL`` and the other
autoencoders), or the ``_call_impl`` of one (``vae.compile()``), it returns what it always returned and also
sets ``decode`` and ``encode`` on that module to ``torch.compile(<bound method>)`` with the same arguments
(so the ``compile`` patch's backend and static-shape choices apply to them too), logged once. A ``decode`` or
``encode`` the user already set on the instance (``vae.decode = torch.compile(vae.decode, ...)``, the form the
codemod writes) is kept. Stands down when ``OptimizedModule.__getattr__`` no longer returns the original
module's attributes as they are.

Example::

    pipe.vae = torch.compile(pipe.vae, backend="neuron", fullgraph=True, dynamic=False)
    image = pipe(prompt).images[0]
    # before: vae.decode runs eagerly (0 graphs)   after: one decode graph, reused by every call
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch

# The methods pipelines (decode) and training scripts (encode) call on a VAE.
_METHODS = ("decode", "encode")


def _autoencoder(target: Any) -> Any:
    """The diffusers model with a ``decode`` that ``torch.compile(target)`` compiles, or None."""
    modeling = sys.modules.get("diffusers.models.modeling_utils")
    if modeling is None:
        return None
    import torch

    owner = target
    if getattr(target, "__func__", None) is torch.nn.Module._call_impl:  # nn.Module.compile()
        owner = target.__self__
    if isinstance(owner, modeling.ModelMixin) and callable(getattr(type(owner), "decode", None)):
        return owner
    return None


class DiffusersVaeCompile(Patch):
    id = "diffusers_vae_compile"
    reason = "torch.compile(pipe.vae) leaves vae.decode (what pipelines call) eager: compile decode/encode too"
    targets = ("torch._dynamo.eval_frame", "torch")

    def patch_module(self, name: str, module: ModuleType) -> bool:
        if name == "torch._dynamo.eval_frame":
            source = inspect.getsource(module.OptimizedModule.__getattr__)
            if "return getattr(self._orig_mod, name)" not in source:
                self.stand_down("OptimizedModule no longer hands over the original module's methods as they are")
                return False
            return True
        self.replace(module, "compile", self._also_methods(module.compile))
        return True

    def _also_methods(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def compile(model: Any = None, *args: Any, **kwargs: Any) -> Any:
            result = original(model, *args, **kwargs)
            vae = _autoencoder(model) if model is not None else None
            if vae is not None:
                patch._compile_methods(vae, original, args, kwargs)
            return result

        return compile

    def _compile_methods(self, vae: Any, compile: Callable[..., Any], args: Any, kwargs: dict[str, Any]) -> None:
        from neuroncompat.device import neuron_available

        if not neuron_available():
            return
        compiled = []
        for method in _METHODS:
            if method in vae.__dict__ or not callable(getattr(type(vae), method, None)):
                continue  # the user's own (compiled) method, or none to compile
            self.replace(vae, method, compile(getattr(vae, method), *args, **kwargs), own=True)
            compiled.append(method)
        if compiled:
            self.changed(
                "torch.compile(%s) also compiles its %s (pipelines call vae.decode, which the compiled module "
                "would run eagerly)",
                type(vae).__name__,
                " and ".join(compiled),
            )
