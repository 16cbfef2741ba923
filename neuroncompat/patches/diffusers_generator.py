"""``diffusers_generator``: a ``torch.Generator`` on the neuron device seeds diffusers' noise from a CPU stream.

Gap (docs/gaps.md#diffusers_generator): ``randn_tensor`` (diffusers/utils/torch_utils.py:61-112, 0.42.1),
which every pipeline's ``prepare_latents`` and the stochastic schedulers call, forces the draw onto the CPU
for a neuron target (``:81-83``) but keeps the generator it was given. With
``torch.Generator(device=accelerator.device)`` (26 of the 27 core training scripts in diffusers/examples) or
``torch.Generator("neuron")``, a neuron generator then reaches a CPU ``torch.randn``: PyTorch's generator
contract has a CPU kernel reject a device generator ("Expected a 'cpu' device type for generator"), and
whatever TorchNeuron does instead, the latents differ from the ``torch.Generator("cpu").manual_seed(s)``
noise that diffusers' Neuron examples, the TorchNeuron blog and every rank of a tensor-parallel run draw.

Fix: for each neuron generator passed to ``randn_tensor``, draw from a CPU generator seeded with its
``initial_seed()``, kept per generator object so consecutive draws (the latents, then each scheduler step's
noise) continue one stream, as they would on one device generator. The neuron generator's offset advances
by what was drawn, as a draw on the device would advance it, so ``manual_seed`` (which resets the offset)
restarts the stream. CPU generators, lists of them and ``None`` are upstream's. ``randn_tensor`` is
imported by name in about 350 diffusers modules, many of them loaded lazily after the shim: the patch swaps
the code of the one function object they all bind (restored by ``neuroncompat.revert()``) rather than
rebinding each alias. Stands down when ``randn_tensor`` no longer forces the CPU for every neuron target
unconditionally (upstream then keeps a neuron generator's own device, or converts it).

Example::

    generator = torch.Generator(device="neuron").manual_seed(0)
    image = pipe(prompt, generator=generator).images[0]
    # after: the same image as with torch.Generator("cpu").manual_seed(0)
"""

from __future__ import annotations

import functools
import inspect
import re
import types
import weakref
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch

# The gap: every neuron target draws on the CPU, whatever generator came with it.
_GAP = re.compile(r'if device\.type == "neuron":\s*\n\s*rand_device = torch\.device\("cpu"\)')
# The global the swapped-in code calls; set in diffusers.utils.torch_utils, where randn_tensor's globals are.
_HOOK = "__neuroncompat_randn_tensor__"


def _trampoline(shape, generator=None, device=None, dtype=None, layout=None):
    """The code swapped into ``randn_tensor``: same parameters, no closure, calls the patch through a global."""
    return __neuroncompat_randn_tensor__(shape, generator, device, dtype, layout)  # type: ignore[name-defined]  # noqa: F821


class _Stream:
    """The CPU generator standing in for one neuron generator, and where that generator was left."""

    __slots__ = ("cpu", "seed", "offset")

    def __init__(self, cpu: Any, seed: int, offset: int | None) -> None:
        self.cpu, self.seed, self.offset = cpu, seed, offset


class DiffusersGenerator(Patch):
    id = "diffusers_generator"
    reason = "randn_tensor hands a neuron torch.Generator to a CPU draw: draw from a CPU stream seeded from it"
    targets = ("diffusers.utils.torch_utils",)

    def __init__(self) -> None:
        super().__init__()
        self._streams: weakref.WeakKeyDictionary[Any, _Stream] = weakref.WeakKeyDictionary()

    def patch_module(self, name: str, module: ModuleType) -> bool:
        randn_tensor = module.randn_tensor
        if not _GAP.search(inspect.getsource(randn_tensor)):
            return False
        if randn_tensor.__code__.co_freevars or list(inspect.signature(randn_tensor).parameters) != list(
            inspect.signature(_trampoline).parameters
        ):
            return False  # a different randn_tensor than the one this patch was written against
        original = types.FunctionType(
            randn_tensor.__code__, randn_tensor.__globals__, randn_tensor.__name__, randn_tensor.__defaults__
        )
        self.replace(module, _HOOK, self._with_cpu_streams(original))
        self.replace(randn_tensor, "__code__", _trampoline.__code__.replace(co_name=randn_tensor.__code__.co_name))
        return True

    def _with_cpu_streams(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def randn_tensor(shape: Any, generator: Any, device: Any, dtype: Any, layout: Any) -> Any:
            if isinstance(generator, list):
                rows = [1, *shape[1:]]
                generator = [patch._cpu_stream(g, rows) for g in generator]
            elif generator is not None:
                generator = patch._cpu_stream(generator, shape)
            return original(shape, generator=generator, device=device, dtype=dtype, layout=layout)

        return randn_tensor

    def _cpu_stream(self, generator: Any, shape: Any) -> Any:
        """The CPU generator to draw ``shape`` from in place of ``generator`` (itself unless on neuron)."""
        import math

        import torch

        if generator.device.type != "neuron":
            return generator
        seed, offset = generator.initial_seed(), _offset(generator)
        stream = self._streams.get(generator)
        if stream is None or stream.seed != seed or stream.offset != offset:
            stream = self._streams[generator] = _Stream(torch.Generator("cpu").manual_seed(seed), seed, offset)
            self.changed(
                "randn_tensor: torch.Generator(%r) seeded %d -> draws from torch.Generator('cpu').manual_seed(%d)",
                str(generator.device),
                seed,
                seed,
            )
        if stream.offset is not None:
            drawn = math.prod(shape)
            stream.offset += (drawn + 3) // 4 * 4  # a device draw advances by whole Philox calls of 4 values
            generator.set_offset(stream.offset)
        return stream.cpu


def _offset(generator: Any) -> int | None:
    """Where the neuron generator's stream stands, or None where the generator keeps no offset."""
    try:
        return int(generator.get_offset())
    except (RuntimeError, AttributeError):
        return None
