"""``parameter_identity``: ``model.to("neuron")`` keeps each parameter object, so an optimizer made before it trains.

Gap (docs/gaps.md#parameter_identity): ``nn.Module._apply`` (torch/nn/modules/module.py, torch 2.13) moves a
parameter in place with ``param.data = moved`` only when ``torch._has_compatible_shallow_copy_type`` accepts the
two tensors; otherwise it puts a *new* ``Parameter`` in the module. Stock torch accepts CPU<->CUDA and refuses
CPU<->PrivateUse1 (``c10/core/TensorImpl.h``, ``has_compatible_shallow_copy_type``: dense backends CPU, CUDA, MPS,
HIP, XPU, HPU, MTIA), and TorchNeuron does not document overriding it. So the CUDA habit::

    optimizer = torch.optim.AdamW(model.parameters())
    model.to("neuron")          # on CUDA: the same parameter objects, now on the GPU

leaves the optimizer holding the old CPU parameters on Neuron: ``loss.backward()`` fills the new ones' ``.grad``,
``optimizer.step()`` updates tensors the model no longer uses, and the script trains nothing without an error
(PyTorch/XLA documents the same trap for its device: build the optimizer after the move). The same holds for any
other reference taken before the move (tied-weight maps, EMA copies, hooks keyed by parameter).

Fix: ``Module.to``, ``Module.cpu`` and the backend's generated ``Module.neuron`` run torch's own ``_apply`` with
``torch.__future__.set_swap_module_params_on_conversion(True)`` (``torch.utils.swap_tensors``: the parameter
object stays, its contents and device change, its gradient moves with it) when the call moves some parameter
between the CPU and a NeuronCore *and* torch refuses ``.data =`` for that pair. Where the device accepts the
assignment (a TorchNeuron that overrides the check), or the move stays on one device, torch's path runs
unchanged; so the patch is right under either reading. An explicit user choice wins: with
``torch.__future__.set_overwrite_module_params_on_conversion(True)`` (replacement asked for) or the swap flag
already set, nothing is changed. Where identity cannot be kept (a parameter that is a tensor subclass, or a swap
torch refuses: a weak reference the user holds, another holder of the tensor), torch's replacing path runs
and one WARNING says that an optimizer made before the move will not train the model.
Stands down where ``nn.Module._apply`` no longer replaces parameters (upstream swapping or assigning by default).

Example::

    model = torch.nn.Linear(8, 8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.to("neuron")
    # before: model.weight is a new Parameter; optimizer.step() changes only the old CPU one
    # after:  model.weight is the same object, on neuron:0; optimizer.step() trains it
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch

# What ``_apply`` does when it cannot assign ``.data``: a new Parameter replaces the old one.
_REPLACES = "self._parameters[key] = out_param"
_active = threading.local()


class ParameterIdentity(Patch):
    id = "parameter_identity"
    reason = (
        "Module.to between the CPU and a NeuronCore replaces parameters; an optimizer made before it trains nothing"
    )
    targets = ("torch.nn.modules.module",)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        import torch

        if _REPLACES not in inspect.getsource(module.Module._apply):
            return False
        backend = torch._C._get_privateuse1_backend_name()
        self.replace(module.Module, "to", self._wrap(module.Module.__dict__["to"], _to_target))
        self.replace(module.Module, "cpu", self._wrap(module.Module.__dict__["cpu"], _cpu_target))
        generated = module.Module.__dict__.get(backend)
        if callable(generated):
            self.replace(module.Module, backend, self._wrap(generated, _backend_target))
        return True

    def _wrap(self, original: Callable[..., Any], target: Callable[..., Any]) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(_active, "on", False):  # a nested call inside one already decided
                return original(self, *args, **kwargs)
            device = _device_or_none(target, args, kwargs)
            crossing = _refused_moves(self, device) if device is not None else []
            if not crossing:
                return original(self, *args, **kwargs)
            return patch._move_keeping_identity(original, self, crossing, device, args, kwargs)

        return wrapper

    def _move_keeping_identity(
        self, original: Callable[..., Any], module: Any, crossing: list[Any], device: Any, args: Any, kwargs: Any
    ) -> Any:
        import torch

        where = f"{type(module).__name__}.to({device.type})"
        blocked = [p for p in crossing if not _swappable(p)]
        if blocked:
            cause = "a parameter or its gradient is a tensor subclass"
            return self._replaced(original, module, where, cause, args, kwargs)
        _active.on = True
        torch.__future__.set_swap_module_params_on_conversion(True)
        try:
            result = original(module, *args, **kwargs)
        except RuntimeError as error:
            if "Couldn't swap" not in str(error):
                raise
            failure: RuntimeError | None = error
        else:
            failure = None
        finally:
            torch.__future__.set_swap_module_params_on_conversion(False)
            _active.on = False
        if failure is not None:  # those already swapped are on the device; torch's path replaces the rest
            return self._replaced(original, module, where, str(failure.__cause__ or failure), args, kwargs)
        self.changed(
            "%s: parameters moved between the CPU and %s with torch.utils.swap_tensors, so they stay the same "
            "objects (torch refuses `.data =` across the CPU and a PrivateUse1 device and would replace them)",
            type(module).__name__,
            device.type,
        )
        return result

    def _replaced(
        self, original: Callable[..., Any], module: Any, where: str, cause: str, args: Any, kwargs: Any
    ) -> Any:
        """torch's replacing path, said out loud: a reference taken before the move goes stale."""
        self.warn(
            "%s replaced its parameters with new ones (%s): an optimizer or any reference made before this call "
            "still holds the old tensors and will not train the model; build the optimizer after the move",
            where,
            cause,
        )
        return original(module, *args, **kwargs)


def _to_target(args: Any, kwargs: Any) -> Any:
    import torch

    return torch._C._nn._parse_to(*args, **kwargs)[0]


def _cpu_target(args: Any, kwargs: Any) -> Any:
    import torch

    return torch.device("cpu")


def _backend_target(args: Any, kwargs: Any) -> Any:
    import torch

    index = kwargs.get("device", args[0] if args else None)
    backend = torch._C._get_privateuse1_backend_name()
    if isinstance(index, (torch.device, str)):
        return torch.device(index)
    return torch.device(backend) if index is None else torch.device(backend, index)


def _device_or_none(target: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    try:
        return target(args, kwargs)
    except (TypeError, RuntimeError, ValueError):  # torch's own call raises the user's error next
        return None


def _parameters(module: Any) -> Iterator[Any]:
    seen: set[int] = set()
    for submodule in module.modules():
        for param in submodule._parameters.values():
            if param is not None and id(param) not in seen:
                seen.add(id(param))
                yield param


def _refused_moves(module: Any, device: Any) -> list[Any]:
    """The parameters this move takes across the CPU and the backend's device where ``.data =`` is refused."""
    import torch

    if (
        torch.__future__.get_swap_module_params_on_conversion()
        or torch.__future__.get_overwrite_module_params_on_conversion()
    ):
        return []  # the user chose how parameters convert
    backend = torch._C._get_privateuse1_backend_name()
    kinds = {"cpu", backend}
    if device.type not in kinds:
        return []
    crossing = [p for p in _parameters(module) if p.device.type in kinds and p.device.type != device.type]
    if not crossing:
        return []
    probe = torch.empty(0, device=device)
    if torch._has_compatible_shallow_copy_type(crossing[0], probe):
        return []  # the device accepts `.data =`: torch moves them in place itself
    return crossing


def _swappable(param: Any) -> bool:
    """A plain parameter (and gradient): ``_apply``'s swap would turn a tensor subclass into a plain Parameter.

    Weak references are not checked here: ``RNNBase._apply`` drops its own before the swap; any other makes
    torch's swap raise, and the move falls back to torch's replacing path with the warning.
    """
    import torch

    grad = param.grad
    return type(param) is torch.nn.Parameter and (grad is None or type(grad) is torch.Tensor)
