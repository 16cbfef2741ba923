"""Placement arguments naming CUDA go to the NeuronCore: ``.to``, ``.cuda()``, factories, loads.

Covered entry points (each rule id is the ``neuron-migrate`` rule that rewrites the call):

- ``Tensor.to`` / ``Module.to`` with ``"cuda"``, ``"cuda:N"`` or ``torch.device("cuda", N)``
  (positional or ``device=``) -> the same on ``neuron`` (NM102);
- ``Tensor.cuda(i)`` / ``Module.cuda(i)`` -> ``.to("neuron:i")`` (NM101);
- ``device=`` of the tensor factories (``torch.zeros``, ``randn``, ``arange``, ``tensor``, ...)
  and of ``Tensor.new_*`` (NM102); ``torch.set_default_device("cuda")`` (NM102);
- ``torch.load(map_location="cuda" | torch.device | {"cuda:1": "cuda:0"})``: loaded on the CPU,
  then its tensors are moved to the NeuronCore (NM102);
- ``from_pretrained(device_map="cuda" | {"": "cuda:0"} | torch.device)`` (NM105);
- ``Tensor.pin_memory("cuda")``: pinned for the current accelerator, the NeuronCore (the device
  argument is deprecated in torch; no rule). ``DataLoader(pin_memory_device="cuda")`` needs
  nothing: torch ignores it (with a deprecation warning) and pins for the current accelerator.

These translate wherever the argument arrives, user or library code: a CUDA device cannot
exist here, so the only thing translating changes is a call that would fail, and a ``"cuda"``
that user code hands to a library (``BatchEncoding.to("cuda")``) still lands on the
NeuronCore. Each wrapper costs two type checks per call unless a CUDA name is passed; only
then is the caller's frame looked at, to log the user line.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

# torch.neuron is registered at runtime (TorchNeuron, or the simulator), so torch's stubs lack it:
# its uses below carry `type: ignore[attr-defined]`.
import torch

from neuroncompat.cuda import sites
from neuroncompat.cuda.devices import names_cuda, to_neuron, translate
from neuroncompat.patch import Patch

FACTORIES = (
    "zeros",
    "ones",
    "empty",
    "full",
    "rand",
    "randn",
    "randint",
    "randperm",
    "arange",
    "range",
    "linspace",
    "logspace",
    "eye",
    "tensor",
    "as_tensor",
    "scalar_tensor",
    "empty_strided",
    "zeros_like",
    "ones_like",
    "empty_like",
    "full_like",
    "rand_like",
    "randn_like",
    "randint_like",
    "tril_indices",
    "triu_indices",
    "normal",
    "sparse_coo_tensor",
)
NEW_METHODS = ("new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "new_empty_strided")


def _wrap_to(original: Callable[..., Any], owner: str) -> Callable[..., Any]:
    """``.to(device, ...)`` with a CUDA device (positional or keyword) -> the NeuronCore."""

    @functools.wraps(original)
    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        if args and names_cuda(args[0]):
            args = (translate(args[0], f"{owner}.to"), *args[1:])
        elif kwargs and names_cuda(kwargs.get("device")):
            kwargs["device"] = translate(kwargs["device"], f"{owner}.to", keyword="device")
        return original(self, *args, **kwargs)

    return to


def _cuda_target(device: Any) -> Any:
    if device is None:
        return f"neuron:{torch.neuron.current_device()}"  # type: ignore[attr-defined]
    if isinstance(device, int):
        return f"neuron:{device}"
    return to_neuron(device) if names_cuda(device) else device


def _tensor_cuda(to: Callable[..., Any]) -> Callable[..., Any]:
    def cuda(self: torch.Tensor, device: Any = None, non_blocking: bool = False, **kwargs: Any) -> torch.Tensor:
        target = _cuda_target(device)
        shown = "" if device is None else repr(device)
        sites.record(sys._getframe(1), f"Tensor.cuda({shown})", f"Tensor.to({str(target)!r})", "NM101")
        return to(self, target, non_blocking=non_blocking, **kwargs)

    cuda.__doc__ = "Moves the tensor to the NeuronCore (NEURONCOMPAT_CUDA=redirect)."
    return cuda


def _module_cuda(to: Callable[..., Any]) -> Callable[..., Any]:
    def cuda(self: torch.nn.Module, device: Any = None) -> torch.nn.Module:
        target = _cuda_target(device)
        shown = "" if device is None else repr(device)
        sites.record(sys._getframe(1), f"Module.cuda({shown})", f"Module.to({str(target)!r})", "NM101")
        return to(self, target)

    cuda.__doc__ = "Moves the module to the NeuronCore (NEURONCOMPAT_CUDA=redirect)."
    return cuda


def _wrap_device_kwarg(original: Callable[..., Any], call: str) -> Callable[..., Any]:
    """A function whose ``device=`` keyword may name CUDA."""

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if kwargs and names_cuda(kwargs.get("device")):
            kwargs["device"] = translate(kwargs["device"], call, keyword="device")
            if _is_host_generator(kwargs.get("generator")):
                # The script's CUDA generator became a CPU one (cuda/generator.py). CUDA refuses a
                # generator on another device, and whether TorchNeuron draws from a host generator
                # onto a NeuronCore is not documented: draw on the host and move, which is right
                # under either reading and gives the CPU's stream (as diffusers' randn_tensor does).
                target = kwargs.pop("device")
                return original(*args, device="cpu", **kwargs).to(target)
        return original(*args, **kwargs)

    return wrapper


def _is_host_generator(generator: Any) -> bool:
    return isinstance(generator, torch._C.Generator) and generator.device.type == "cpu"


def _wrap_set_default_device(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def set_default_device(device: Any) -> None:
        if names_cuda(device):
            device = translate(device, "torch.set_default_device")
        return original(device)

    return set_default_device


def _wrap_pin_memory(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Tensor.pin_memory(<CUDA>)`` -> ``Tensor.pin_memory()``: the current accelerator's pinning."""

    @functools.wraps(original)
    def pin_memory(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        device = args[0] if args else kwargs.get("device")
        if device is None or not names_cuda(device):
            return original(self, *args, **kwargs)
        sites.record(sys._getframe(1), f"Tensor.pin_memory({device!r})", "Tensor.pin_memory()", None)
        return original(self)

    return pin_memory


def _to_device(value: Any, device: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return type(value)((k, _to_device(v, device)) for k, v in value.items())
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_to_device(v, device) for v in value)
    return value


def _wrap_load(original: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.load(map_location=<CUDA>)``: load on the CPU, then move the tensors to Neuron."""

    @functools.wraps(original)
    def load(*args: Any, **kwargs: Any) -> Any:
        location = kwargs.get("map_location")
        target = None
        if names_cuda(location):
            target = to_neuron(location)
        elif isinstance(location, dict) and any(names_cuda(v) for v in location.values()):
            target = next(to_neuron(v) for v in location.values() if names_cuda(v))
        if target is None:
            return original(*args, **kwargs)
        sites.record(
            sys._getframe(1),
            f"torch.load(map_location={location!r})",
            f"torch.load(map_location='cpu') then .to({str(target)!r})",
            "NM102",
        )
        kwargs["map_location"] = "cpu"
        return _to_device(original(*args, **kwargs), target)

    return load


def _device_map(value: Any) -> Any:
    if names_cuda(value):
        return to_neuron(value)
    if isinstance(value, dict) and any(names_cuda(v) for v in value.values()):
        return {k: to_neuron(v) if names_cuda(v) else v for k, v in value.items()}
    return None


def wrap_from_pretrained(original: classmethod) -> classmethod:
    """``from_pretrained(device_map=<CUDA>)`` loads onto the NeuronCore instead."""
    function = original.__func__

    @functools.wraps(function)
    def from_pretrained(cls: Any, *args: Any, **kwargs: Any) -> Any:
        requested = kwargs.get("device_map")
        if requested is not None:
            mapped = _device_map(requested)
            if mapped is not None:
                sites.record(
                    sys._getframe(1),
                    f"from_pretrained(device_map={requested!r})",
                    f"from_pretrained(device_map={mapped!r})",
                    "NM105",
                )
                kwargs["device_map"] = mapped
        return function(cls, *args, **kwargs)

    return classmethod(from_pretrained)


def _cache_torch_identity_sets() -> None:
    """Let torch build its sets of factory functions from the originals, before they are wrapped.

    ``torch.utils._device._device_constructors()`` (cached on first use) is how ``with
    torch.device("meta"):`` recognises a factory call; built from the wrappers, it would miss the
    originals, and transformers' meta-device model construction would leave non-persistent
    buffers (RoPE ``inv_freq``) uninitialised.
    """
    from torch.utils import _device

    _device._device_constructors()


def install(patch: Patch) -> None:
    """Wrap the torch entry points listed in the module docstring."""
    _cache_torch_identity_sets()
    tensor, module = torch.Tensor, torch.nn.Module
    tensor_to, module_to = tensor.to, module.to
    patch.replace(tensor, "to", _wrap_to(tensor_to, "Tensor"))
    patch.replace(tensor, "cuda", _tensor_cuda(tensor_to))
    patch.replace(module, "to", _wrap_to(module_to, "Module"))
    patch.replace(module, "cuda", _module_cuda(module_to))
    for name in FACTORIES:
        original = getattr(torch, name, None)
        if original is not None:
            patch.replace(torch, name, _wrap_device_kwarg(original, f"torch.{name}"))
    for name in NEW_METHODS:
        original = getattr(tensor, name, None)
        if original is not None:
            patch.replace(tensor, name, _wrap_device_kwarg(original, f"Tensor.{name}"))
    patch.replace(tensor, "pin_memory", _wrap_pin_memory(tensor.pin_memory))
    patch.replace(torch, "set_default_device", _wrap_set_default_device(torch.set_default_device))
    patch.replace(torch, "load", _wrap_load(torch.load))
