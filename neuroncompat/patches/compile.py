"""``compile``: ``torch.compile`` calls written for CUDA compile for Neuron instead.

Gap: ``torch.compile(model)`` with no backend uses Dynamo's default, ``"inductor"``, which has no
Neuron code generator; CUDA scripts also pass CUDA-only modes (``"reduce-overhead"`` is CUDA
graphs, ``"max-autotune"`` tunes Triton kernels) and sometimes ``dynamic=True``, which the Neuron
backend rejects ("dynamic=True is rejected during compilation", TRL #7660). transformers picks
``backend="neuron"`` for its own compiles on a neuron model (``_default_compile_config``, the
Trainer's ``torch_compile_backend``), but a user's ``torch.compile`` or ``model.compile()`` and a
user-built ``CompileConfig()`` (whose defaults are inductor + reduce-overhead) do not
(docs/gaps.md#compile).

Fix, inside ``torch.compile`` (``nn.Module.compile`` and transformers' ``get_compiled_call`` go
through it):

* no backend, and Dynamo's default is still ``"inductor"`` → ``backend="neuron"`` (logged once);
  a default chosen with ``torch._dynamo.backends.registry.set_default_backend`` is kept (TorchNeuron
  documents the backend as "auto-selected when running on a Neuron device"; the simulator does it
  that way), and its mode and ``dynamic`` are adjusted as for ``"neuron"``;
* ``backend="inductor"`` or ``"cudagraphs"`` → ``"neuron"``, warned: neither can target Neuron;
  any other backend (``"eager"``, ``"aot_eager"``, a callable) is kept;
* ``mode=`` with the neuron backend is dropped, warned when it was not ``"default"``: every mode
  but the default configures inductor or CUDA graphs;
* ``dynamic=True`` → ``False``, warned.

Stands down when inductor has a code generator for the ``neuron`` device (one registered with
``torch._inductor.codegen.common.register_backend_for_device``): then ``inductor`` and its modes
can compile for Neuron. That registry is only there once Dynamo is loaded (``torch.compile``
loads it), so the check runs when ``torch._dynamo`` is imported and undoes the wrapper.

Example::

    model = torch.compile(model, mode="reduce-overhead")
    # on Neuron: torch.compile(model, backend="neuron")  +  one warning about the mode
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch

# Backends that generate CUDA (or CPU) code and cannot compile a graph of neuron tensors.
_CUDA_BACKENDS = ("inductor", "cudagraphs")


class Compile(Patch):
    id = "compile"
    reason = "torch.compile defaults to inductor and CUDA-only modes; Neuron needs backend='neuron' with static shapes"
    targets = ("torch", "torch._dynamo")

    def patch_module(self, name: str, module: ModuleType) -> bool:
        if name == "torch._dynamo":
            if _inductor_targets_neuron():
                self.stand_down("inductor has a neuron code generator")
                return False
            return True
        self.replace(module, "compile", self._for_neuron(module.compile))
        return True

    def _for_neuron(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def compile(*args: Any, **kwargs: Any) -> Any:
            return original(*args, **patch.neuron_kwargs(kwargs))

        return compile

    def neuron_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The keyword arguments of one ``torch.compile`` call, adjusted for the neuron backend."""
        kwargs = dict(kwargs)
        backend = kwargs.get("backend")
        if backend is None:
            if _default_backend() != "inductor":
                return self._neuron_arguments(kwargs)
            kwargs["backend"] = "neuron"
            self.changed("torch.compile() with no backend -> backend='neuron' (inductor has no Neuron code generator)")
        elif isinstance(backend, str) and backend in _CUDA_BACKENDS:
            kwargs["backend"] = "neuron"
            self.warn("torch.compile(backend=%r) -> backend='neuron': %s cannot compile for Neuron", backend, backend)
        elif backend != "neuron":
            return kwargs
        return self._neuron_arguments(kwargs)

    def _neuron_arguments(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Drop a CUDA ``mode`` and ``dynamic=True``, which the neuron backend would fall back from or reject."""
        mode = kwargs.pop("mode", None)
        if mode not in (None, "default"):
            self.warn("torch.compile(mode=%r) dropped: that mode configures inductor/CUDA graphs, not Neuron", mode)
        if kwargs.get("dynamic") is True:
            kwargs["dynamic"] = False
            self.warn("torch.compile(dynamic=True) -> dynamic=False: the Neuron backend rejects dynamic graphs")
        return kwargs


def _inductor_targets_neuron() -> bool:
    """Inductor has a device code generator registered for ``neuron`` (cheap once Dynamo is loaded)."""
    from torch._inductor.codegen.common import device_codegens

    return "neuron" in device_codegens


def _default_backend() -> Any:
    """Dynamo's default backend where torch lets it be set; ``"inductor"`` where it is fixed."""
    from torch._dynamo.backends import registry

    getter = getattr(registry, "get_default_backend", None)
    return getter() if getter is not None else "inductor"
