"""Legacy CUDA tensor types (``torch.cuda.FloatTensor``, ``LongTensor``, ...) on the NeuronCore.

Older GAN and RL scripts (PyTorch-GAN, early DQN code) pick a tensor type once and build every
tensor through it::

    Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
    valid = Tensor(imgs.size(0), 1).fill_(1.0)
    z = Tensor(np.random.normal(0, 1, (n, latent_dim)))
    real = imgs.type(Tensor)
    assert isinstance(z, torch.cuda.FloatTensor)

On this machine ``torch.cuda.FloatTensor(...)`` raises "Torch not compiled with CUDA enabled".
Under the redirect each ``torch.cuda.<T>Tensor`` is a stand-in that, from user code:

- called, builds the tensor as the CPU type ``torch.<T>Tensor`` would (sizes, sequences, NumPy
  arrays, tensors) and moves it to the current NeuronCore;
- given to ``Tensor.type`` (the type or its name ``"torch.cuda.FloatTensor"``), moves and casts
  the tensor to that dtype on the NeuronCore;
- in ``isinstance``, matches a NeuronCore tensor of that dtype.

Library code gets torch's answers (the call fails as before, ``isinstance`` is False): the
types name CUDA, which libraries must see is absent. The log names construction and casts with
``neuron-migrate``'s NM108, which rewrites them (``torch.empty(*sizes, dtype=..., device=...)``,
``torch.tensor(data, dtype=..., device=...)``, ``x.to(device, dtype)``) where the arguments say
what they are and leaves the NM925 TODO elsewhere; ``isinstance`` checks have no rule.
"""

from __future__ import annotations

import sys
from typing import Any

# torch.neuron is registered at runtime (TorchNeuron, or the simulator), so torch's stubs lack it.
import torch

from neuroncompat.cuda import sites
from neuroncompat.cuda.callers import is_user_frame
from neuroncompat.patch import Patch

TYPES: dict[str, torch.dtype] = {
    "FloatTensor": torch.float32,
    "DoubleTensor": torch.float64,
    "HalfTensor": torch.float16,
    "BFloat16Tensor": torch.bfloat16,
    "ByteTensor": torch.uint8,
    "CharTensor": torch.int8,
    "ShortTensor": torch.int16,
    "IntTensor": torch.int32,
    "LongTensor": torch.int64,
    "BoolTensor": torch.bool,
}


def _current() -> str:
    return f"neuron:{torch.neuron.current_device()}"  # type: ignore[attr-defined]


class _LegacyCudaType(type):
    """Metaclass of the ``torch.cuda.<T>Tensor`` stand-ins (see the module docstring)."""

    _real: Any
    _cpu: Any
    dtype: torch.dtype

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        frame = sys._getframe(1)
        if not is_user_frame(frame):
            return cls._real(*args, **kwargs)
        target = _current()
        sites.record(frame, f"{cls._name}(...)", f"torch.{cls.__name__}(...).to({target!r})", "NM108")
        return cls._cpu(*args, **kwargs).to(target)

    def __instancecheck__(cls, instance: Any) -> bool:
        if not isinstance(instance, torch.Tensor) or instance.device.type != "neuron":
            return isinstance(instance, cls._real)
        frame = sys._getframe(1)
        if not is_user_frame(frame):
            return False
        sites.record(frame, f"isinstance(x, {cls._name})", f"x.dtype == {cls.dtype} on neuron", None)
        return instance.dtype == cls.dtype

    @property
    def _name(cls) -> str:
        return f"torch.cuda.{cls.__name__}"


def _stand_in(name: str, dtype: torch.dtype) -> type:
    real = getattr(torch.cuda, name)
    namespace = {"_real": real, "_cpu": getattr(torch, name), "dtype": dtype, "__doc__": real.__doc__}
    return _LegacyCudaType(name, (), {**namespace, "__module__": "torch.cuda"})


def _legacy_target(value: Any) -> _LegacyCudaType | None:
    """The stand-in ``Tensor.type(value)`` names: the type itself or its name."""
    if isinstance(value, _LegacyCudaType):
        return value
    if type(value) is str and value.startswith("torch.cuda."):
        found = getattr(torch.cuda, value[len("torch.cuda.") :], None)
        return found if isinstance(found, _LegacyCudaType) else None
    return None


def _wrap_type(original: Any) -> Any:
    def type_(self: torch.Tensor, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
        target = _legacy_target(dtype) if dtype is not None else None
        if target is None:
            return original(self, dtype, non_blocking, **kwargs) if dtype is not None else original(self)
        device = _current()
        became = f"Tensor.to({device!r}, {target.dtype})"
        sites.record(sys._getframe(1), f"Tensor.type({target._name})", became, "NM108")
        return self.to(device, target.dtype, non_blocking=non_blocking)

    type_.__doc__ = original.__doc__
    return type_


def install(patch: Patch) -> None:
    for name, dtype in TYPES.items():
        if hasattr(torch.cuda, name):
            patch.replace(torch.cuda, name, _stand_in(name, dtype))
    patch.replace(torch.Tensor, "type", _wrap_type(torch.Tensor.type))
