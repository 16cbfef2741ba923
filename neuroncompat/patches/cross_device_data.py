"""``cross_device_data``: library code that moves tensors between the CPU and a NeuronCore with ``tensor.data =``.

Gap (docs/gaps.md#cross_device_data): stock torch refuses ``x.data = y`` between the CPU and any PrivateUse1
device ("Attempted to call `variable.set_data(tensor)`, but `variable` and `tensor` have incompatible tensor
type": ``c10/core/TensorImpl.h``, ``has_compatible_shallow_copy_type``, whose dense backends are CPU, CUDA,
MPS, HIP, XPU, HPU and MTIA; torch 2.13). TorchNeuron is a PrivateUse1 plugin on stock torch and does not
document overriding that check, so on a trn2 these library paths may stop with that error:

- FSDP2's ``fully_shard`` of a CPU-loaded model: ``_move_states_to_device``
  (torch/distributed/fsdp/_fully_shard/_fsdp_init.py:369-401) moves every plain parameter and buffer with
  ``tensor.data = tensor.to(device)``;
- FSDP1's ``FullyShardedDataParallel(..., device_id=...)`` of a CPU model: ``_move_states_to_device``
  (torch/distributed/fsdp/_init_utils.py:1031-1058), ``param.data = param.to(device)`` (and its grad, and every
  buffer);
- PEFT's LoRA initialisations that compute from the base weight on the device and assign the result to the
  adapter, still on the CPU when they run (``LoraLayer.update_layer`` moves it afterwards, peft/tuners/lora/
  layer.py:288-314): ``olora_init``, ``pissa_init``, ``corda_init``, ``loftq_init``, ``lora_ga_init``,
  ``mica_init`` (``self.lora_A[name].weight.data = ...``, :405-406, :458-459, :569-570, :594-599, :723-724,
  :496-497, and ``Embedding.mica_init`` :1329-1330);
- diffusers' group offloading (``enable_group_offload``/``apply_group_offloading``, every ``offload_type``, with
  or without streams or a disk path): ``ModuleGroup`` onloads with ``tensor.data = moved`` and offloads with
  ``param.data = <CPU tensor>`` (diffusers/hooks/group_offloading.py:209-214, :262-274, :314-351);
- diffusers' ``unload_textual_inversion``: a new CPU ``nn.Embedding`` gets ``.weight.data =`` the text
  encoder's (device) weights (diffusers/loaders/textual_inversion.py:603-604).
Other ``.data =`` sites in the installed libraries assign on one device (views, dtype casts, merges).
Checked against TorchNeuron 2.34's documentation (nothing said about ``set_data`` or this check).

Fix, right whether the device accepts the assignment or refuses it:
- wrap both ``_move_states_to_device``: before upstream runs, each plain ``Parameter`` or tensor whose move
  torch would refuse (``torch._has_compatible_shallow_copy_type`` of its device and the target's is False) is
  moved with ``torch.utils.swap_tensors`` (same Python object, attributes, ``requires_grad``; a gradient moves
  with it). Upstream then runs and moves the rest as before; where the device accepts ``.data =``, nothing is
  swapped and upstream does all of it;
- wrap the PEFT LoRA initialisations above: when the base layer's weight is on a ``neuron`` device and the
  adapter's modules and parameters are elsewhere, they are moved to that device first (``Module.to``, which
  replaces parameters whose types are incompatible: torch's own ``nn.Module._apply``), so the assignments run on
  one device. Only the device changes (the dtype is left to ``update_layer``'s move after the init, as before);
- wrap ``ModuleGroup.onload_``/``offload_`` and ``unload_textual_inversion``: while they run, ``torch.Tensor``
  has a ``data`` property (torch's own getter; a setter that calls torch's, except that on the thread running
  the wrapped function an assignment torch refuses for the two tensor types is done with ``swap_tensors``), removed
  when they return. The assignments there go back and forth, so they cannot be done ahead.
Stands down where none of those functions assigns ``.data`` across devices any more (their source is read).

Example::

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))  # on the CPU
    fully_shard(model)                                  # rank on neuron:N, process group "neuron"
    # before: RuntimeError: ... `variable` and `tensor` have incompatible tensor type
    # after:  parameters and the BatchNorm buffers are on neuron:N, the same Python objects
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch

_FSDP2 = "torch.distributed.fsdp._fully_shard._fsdp_init"
_FSDP1 = "torch.distributed.fsdp._init_utils"
_PEFT_LORA = "peft.tuners.lora.layer"
_DIFFUSERS_OFFLOAD = "diffusers.hooks.group_offloading"
_DIFFUSERS_TEXTUAL_INVERSION = "diffusers.loaders.textual_inversion"
# The LoRA initialisations that assign an adapter's data from a result computed on the base weight's device.
_LORA_INITS = ("olora_init", "pissa_init", "corda_init", "loftq_init", "lora_ga_init", "mica_init")
# ``x.data = y.to(...)``: a move by ``set_data`` (FSDP).
_MOVE_BY_DATA = re.compile(r"\.data = \w+\.to\(")
# A statement assigning some tensor's ``.data`` (diffusers), not a docstring mentioning one.
_DATA_ASSIGNMENT = re.compile(r"^\s*[\w.\[\]]+\.data = ", re.MULTILINE)
# ``self.lora_X[name](.weight).data = ...``: an adapter's data assigned (PEFT).
_ADAPTER_DATA = re.compile(r"self\.lora_\w+\[\w+\](?:\.weight)?\.data = ")


def _source(function: Any) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


def swap_in(tensor: Any, value: Any) -> bool:
    """``tensor.data = value`` done with ``torch.utils.swap_tensors``, for a move torch refuses.

    ``tensor`` (a plain ``Parameter`` or tensor) stays the same Python object, with its attributes and
    ``requires_grad``, and shares ``value``'s storage as after ``.data =``; a gradient moves with it. False, with
    nothing changed, for what this does not handle (a tensor subclass, weak references, extra references to its
    impl): the caller's own path then runs (and raises torch's error).
    """
    import torch

    plain = (torch.Tensor, torch.nn.Parameter)
    if type(tensor) not in plain or type(value) not in plain:
        return False
    with torch.no_grad():
        if isinstance(tensor, torch.nn.Parameter):
            replacement = torch.nn.Parameter(value.detach(), requires_grad=tensor.requires_grad)
        else:
            replacement = value.detach().requires_grad_(tensor.requires_grad)
        if tensor.grad is not None:
            replacement.grad = tensor.grad.to(value.device, value.dtype)
        replacement.__dict__.update(tensor.__dict__)  # swapped in with the impl: the object keeps its attributes
        try:
            torch.utils.swap_tensors(tensor, replacement)
        except RuntimeError:
            return False
    return True


def swap_onto(tensor: Any, device: Any) -> bool:
    """Move ``tensor`` to ``device`` with :func:`swap_in` (same object, attributes, ``requires_grad``, gradient)."""
    import torch

    if type(tensor) not in (torch.Tensor, torch.nn.Parameter):
        return False
    with torch.no_grad():
        return swap_in(tensor, tensor.detach().to(device))


# -- ``.data =`` inside library functions that assign across devices (diffusers) --------------------------------
_scope = threading.local()
_scope_lock = threading.Lock()
_scope_depth = 0
_swapped = 0  # assignments swapped in so far, for the wrappers' log lines


def _set_data(tensor: Any, value: Any) -> None:
    """``Tensor.data``'s setter inside :func:`_swapping_data`: torch's, but a move it refuses is swapped in."""
    import torch

    global _swapped
    setter = torch._C.TensorBase.__dict__["data"].__set__
    if (
        getattr(_scope, "depth", 0)  # only on a thread running a wrapped function
        and isinstance(value, torch.Tensor)
        and not torch._has_compatible_shallow_copy_type(tensor, value)
        and swap_in(tensor, value)
    ):
        _swapped += 1
        return
    setter(tensor, value)


@contextlib.contextmanager
def _swapping_data() -> Iterator[None]:
    """While it is open, ``x.data = y`` that torch refuses for the two tensor types is done by :func:`swap_in`.

    ``torch.Tensor`` gets a ``data`` property (torch's own getter, :func:`_set_data`) for the duration, removed when
    the last one closes; threads not inside a wrapped function keep torch's setter behaviour.
    """
    import torch

    global _scope_depth
    data = torch._C.TensorBase.__dict__["data"]
    with _scope_lock:
        if _scope_depth == 0:
            torch.Tensor.data = property(data.__get__, _set_data, doc=data.__doc__)  # type: ignore[assignment]
        _scope_depth += 1
    _scope.depth = getattr(_scope, "depth", 0) + 1
    try:
        yield
    finally:
        _scope.depth -= 1
        with _scope_lock:
            _scope_depth -= 1
            if _scope_depth == 0:
                del torch.Tensor.data


class CrossDeviceData(Patch):
    id = "cross_device_data"
    reason = "FSDP, PEFT's LoRA inits and diffusers' offloading move tensors with `.data =`, refused for PrivateUse1"
    targets = (_FSDP2, _FSDP1, _PEFT_LORA, _DIFFUSERS_OFFLOAD, _DIFFUSERS_TEXTUAL_INVERSION)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        if name == _DIFFUSERS_OFFLOAD:
            group = module.ModuleGroup
            if not _DATA_ASSIGNMENT.search(_source(group)):
                return False
            for method in ("onload_", "offload_"):
                wrapped = self._in_scope(group.__dict__[method], "diffusers group offloading")
                self.replace(group, method, _compiler_disabled(wrapped))
            return True
        if name == _DIFFUSERS_TEXTUAL_INVERSION:
            mixin = module.TextualInversionLoaderMixin
            original = mixin.__dict__["unload_textual_inversion"]
            if not _DATA_ASSIGNMENT.search(_source(original)):
                return False
            self.replace(
                mixin, "unload_textual_inversion", self._in_scope(original, "diffusers unload_textual_inversion")
            )
            return True
        if name in (_FSDP2, _FSDP1):
            original = module._move_states_to_device
            if not _MOVE_BY_DATA.search(_source(original)):
                return False
            label = "fully_shard (FSDP2)" if name == _FSDP2 else "FullyShardedDataParallel (FSDP1)"
            self.replace(module, "_move_states_to_device", self._wrap_move_states(original, label))
            return True
        patched = False
        for cls in vars(module).values():
            if not isinstance(cls, type) or cls.__module__ != module.__name__:
                continue
            for method in _LORA_INITS:
                original = cls.__dict__.get(method)
                if callable(original) and _ADAPTER_DATA.search(_source(original)):
                    self.replace(cls, method, self._wrap_lora_init(original))
                    patched = True
        return patched

    def _wrap_move_states(self, original: Callable[..., Any], label: str) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def _move_states_to_device(params: list[Any], buffers: list[Any], device: Any, *args: Any) -> Any:
            import torch

            if device is not None:
                target = torch.device(device)
                swapped = _move_refused(itertools.chain(params, buffers), target)
                if swapped:
                    patch.changed(
                        "%s: CPU parameters and buffers moved to %s with torch.utils.swap_tensors (torch refuses "
                        "`tensor.data =` across the CPU and a PrivateUse1 device)",
                        label,
                        target.type,
                    )
            return original(params, buffers, device, *args)

        return _move_states_to_device

    def _in_scope(self, original: Callable[..., Any], label: str) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            before = _swapped
            with _swapping_data():
                result = original(*args, **kwargs)
            if _swapped != before:
                patch.changed(
                    "%s: `.data =` across the CPU and the device done with torch.utils.swap_tensors (torch refuses "
                    "it between the CPU and a PrivateUse1 device)",
                    label,
                )
            return result

        return wrapper

    def _wrap_lora_init(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def init(layer: Any, adapter_name: str, *args: Any, **kwargs: Any) -> Any:
            device = _base_neuron_device(layer)
            if device is not None and _adapter_to(layer, adapter_name, device):
                patch.changed(
                    "peft LoRA %s: the adapter moved to the base layer's %s device before its weights are set "
                    "(torch refuses `.data =` across the CPU and a PrivateUse1 device)",
                    original.__name__,
                    device.type,
                )
            return original(layer, adapter_name, *args, **kwargs)

        return init


def _compiler_disabled(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` run eagerly under ``torch.compile`` (diffusers' ``onload_``/``offload_`` are, upstream)."""
    import torch

    return torch.compiler.disable(function)


def _move_refused(tensors: Iterable[Any], device: Any) -> bool:
    """Swap onto ``device`` each tensor whose move by ``.data =`` torch would refuse; True if any was."""
    import torch

    swapped = False
    probe: dict[tuple[Any, Any], bool] = {}
    for tensor in tensors:
        if tensor.device == device or tensor.device.type == "meta":
            continue
        key = (tensor.device, tensor.layout)
        if key not in probe:
            empty = torch.empty(0, device=tensor.device, layout=tensor.layout)
            probe[key] = torch._has_compatible_shallow_copy_type(empty, torch.empty(0, device=device))
        if not probe[key] and swap_onto(tensor, device):
            swapped = True
    return swapped


def _base_neuron_device(layer: Any) -> Any:
    """The device of the LoRA layer's base weight when it is a ``neuron`` device, else None."""
    import torch

    try:
        weight = layer.get_base_layer().weight
    except AttributeError:
        return None
    device = getattr(weight, "device", None)
    if not isinstance(device, torch.device) or device.type != "neuron":
        return None
    return device


def _adapter_to(layer: Any, adapter_name: str, device: Any) -> bool:
    """Move adapter ``adapter_name``'s modules and parameters (not the others) to ``device``; True if any moved."""
    import torch

    moved = False
    for attribute in tuple(getattr(layer, "adapter_layer_names", ())) + tuple(getattr(layer, "other_param_names", ())):
        container = getattr(layer, attribute, None)
        if not isinstance(container, (torch.nn.ModuleDict, torch.nn.ParameterDict)) or adapter_name not in container:
            continue
        item = container[adapter_name]
        if isinstance(item, torch.nn.Module):
            tensors = list(item.parameters()) + list(item.buffers())
            if any(t.device != device and t.device.type != "meta" for t in tensors):
                item.to(device)
                moved = True
        elif isinstance(item, torch.nn.Parameter) and item.device != device and item.device.type != "meta":
            parameters: Any = container  # a ParameterDict (narrowed to ModuleDict by the isinstance above)
            parameters[adapter_name] = torch.nn.Parameter(item.detach().to(device), requires_grad=item.requires_grad)
            moved = True
    return moved
