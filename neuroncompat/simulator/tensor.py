"""The simulated device's tensor: a wrapper subclass whose data lives in a CPU tensor.

Every op on a ``NeuronTensor`` reaches :meth:`NeuronTensor.__torch_dispatch__` below autograd,
so autograd, views and in-place semantics are PyTorch's own: the wrapper only unwraps the CPU
payloads, runs the op on them and wraps the results with the right device index. In-place and
``out=`` ops return the caller's own tensor objects, so aliasing holds as on a real device.

What the real device would reject, the simulator rejects too: mixing a CPU tensor with a Neuron
tensor in one op (the "Expected all tensors to be on the same device" error a ported script hits
on hardware), mixing two cores, and ``.numpy()`` without a ``.cpu()`` first. Random ops draw from
the device's own generator (``torch.neuron.manual_seed``), not from the CPU one.

Dynamo traces through the wrapper with the traceable-subclass protocol
(``__tensor_flatten__``/``__tensor_unflatten__``), so a graph handed to the ``neuron`` compile
backend is the one the real backend would receive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, SupportsIndex

import torch

from neuroncompat.simulator import rng, state

_CPU = torch.device("cpu")

# Ops for which CUDA (and Neuron) accept CPU tensors beside device tensors: copies between
# devices, and indexing with host-side indices.
_MIXED_DEVICE_OK = frozenset(
    {
        "aten::copy_",
        "aten::_to_copy",
        "aten::_copy_from",
        "aten::_copy_from_and_resize",
        "aten::index.Tensor",
        "aten::index_put_",
        "aten::index_put",
        "aten::_index_put_impl_",
        "aten::_unsafe_index.Tensor",
        "aten::_unsafe_index_put",
        "aten::set_.source_Tensor",
    }
)


class OpObserver(Protocol):
    """Told about the ops it watches as they run on the device (``neuroncompat simulate``'s recorder).

    ``watches`` is asked once per op overload (the answer is cached with the op), so an op nobody
    watches costs one attribute test per call; ``saw`` runs before the op, on the caller's stack.
    """

    def watches(self, name: str) -> bool: ...

    def saw(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None: ...


_observer: OpObserver | None = None


def set_op_observer(observer: OpObserver | None) -> None:
    """Install (or with None remove) the one :class:`OpObserver`; forgets which ops were watched."""
    global _observer
    _observer = observer
    _OP_INFO.clear()


class _OpInfo:
    """What the dispatcher needs to know about one op, computed once per overload."""

    __slots__ = ("name", "mixed_ok", "random", "generator_arg", "device_arg", "write_returns", "watched")

    def __init__(self, func: torch._ops.OpOverload) -> None:
        schema = func._schema
        self.name = schema.name if not schema.overload_name else f"{schema.name}.{schema.overload_name}"
        self.watched = _observer is not None and _observer.watches(self.name)
        self.mixed_ok = schema.name in _MIXED_DEVICE_OK or self.name in _MIXED_DEVICE_OK
        self.random = torch.Tag.nondeterministic_seeded in func.tags
        self.generator_arg = any(a.name == "generator" for a in schema.arguments)
        # Where a positional `device` argument stands (aten::to.device), or -1: most overloads
        # take it by keyword, but inference mode dispatches `Tensor.to(device)` undecomposed.
        self.device_arg = next(
            (i for i, a in enumerate(schema.arguments) if a.name == "device" and not a.kwarg_only), -1
        )
        # For each return: the (positional index, kwarg name) of the input it writes, if any.
        writes: list[tuple[int, str] | None] = []
        for ret in schema.returns:
            target = None
            if ret.alias_info is not None and ret.alias_info.is_write:
                for i, arg in enumerate(schema.arguments):
                    if arg.alias_info is not None and arg.alias_info.before_set == ret.alias_info.before_set:
                        target = (i, arg.name)
                        break
            writes.append(target)
        self.write_returns = tuple(writes) if any(w is not None for w in writes) else None


_OP_INFO: dict[torch._ops.OpOverload, _OpInfo] = {}


def _op_info(func: torch._ops.OpOverload) -> _OpInfo:
    info = _OP_INFO.get(func)
    if info is None:
        info = _OP_INFO[func] = _OpInfo(func)
    return info


def map_tensors(fn: Callable[[torch.Tensor], Any], value: Any) -> Any:
    """Apply ``fn`` to every tensor in an op's arguments or results.

    Op arguments and results nest only tuples (including ``torch.return_types``), lists and
    kwargs dicts, so this plain walk does what ``torch.utils._pytree.tree_map`` does here at a
    fraction of its cost, which is most of the simulator's per-op overhead.
    """
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (tuple, list)):
        return type(value)([map_tensors(fn, v) for v in value])
    if isinstance(value, dict):
        return {k: map_tensors(fn, v) for k, v in value.items()}
    return value


def _device(index: int) -> torch.device:
    return torch.device("neuron", index)


class NeuronTensor(torch.Tensor):
    """A tensor on a simulated NeuronCore; its data is the CPU tensor ``_elem``."""

    _elem: torch.Tensor
    # torch's own wrapper subclasses do this; the stubs type the attribute as Tensor's method.
    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    @staticmethod
    def __new__(cls, elem: torch.Tensor, index: int = 0) -> NeuronTensor:
        out = torch.Tensor._make_wrapper_subclass(
            cls,
            elem.size(),
            strides=elem.stride(),
            storage_offset=elem.storage_offset(),
            dtype=elem.dtype,
            layout=elem.layout,
            device=_device(index),
            requires_grad=elem.requires_grad,
        )
        out._elem = elem
        state.track_allocation(elem, index)
        return out

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]  # stub: untyped kw-only
        body = repr(self._elem.detach())
        suffix = f", device='{self.device}'"
        if self.requires_grad and self.grad_fn is None:
            suffix += ", requires_grad=True"
        elif self.grad_fn is not None:
            suffix += f", grad_fn=<{type(self.grad_fn).__name__}>"
        return body[:-1] + suffix + ")" if body.endswith(")") else body

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        # torch.save of a device tensor stores the CPU payload: it loads on CPU anywhere.
        return self._elem.detach().requires_grad_(self.requires_grad).__reduce_ex__(protocol)

    def untyped_storage(self) -> torch.UntypedStorage:
        """The payload's storage, so storage-pointer checks (tied weights, safetensors) work.

        While Dynamo fakeifies inputs it must see the wrapper's own (empty) storage instead:
        sharing the payload's storage would alias the wrapper with its inner tensor.
        """
        from torch._guards import TracingContext

        if TracingContext.try_get() is not None:
            return super().untyped_storage()
        return self._elem.untyped_storage()

    def data_ptr(self) -> int:
        """The payload's first element, consistent with :meth:`untyped_storage`.

        A device tensor's ``data_ptr()`` is the address of its first element in device memory;
        safetensors compares it with the storage's span to find tensors that share memory, and
        refuses to save (accelerate ``save_state``, Trainer checkpoints) when it reads 0 beside a
        real storage pointer. Under Dynamo it stays the wrapper's own, as the storage does.
        """
        from torch._guards import TracingContext

        if TracingContext.try_get() is not None:
            return super().data_ptr()
        return self._elem.data_ptr()

    def tolist(self) -> Any:
        return self._elem.tolist()

    def numpy(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"can't convert {self.device} device type tensor to numpy. "
            "Use Tensor.cpu() to copy the tensor to host memory first."
        )

    # -- traceable wrapper subclass protocol (Dynamo / AOTAutograd) --------------------------
    def __tensor_flatten__(self) -> tuple[list[str], int]:
        return ["_elem"], self.device.index or 0

    @staticmethod
    def __tensor_unflatten__(
        inner: dict[str, torch.Tensor], index: int, outer_size: Any, outer_stride: Any
    ) -> NeuronTensor:
        return NeuronTensor(inner["_elem"], index)

    # -- dispatch ---------------------------------------------------------------------------
    # The stubs type Tensor.__torch_dispatch__ as the plain function torch assigns to it, not a classmethod.
    @classmethod
    def __torch_dispatch__(  # type: ignore[override]
        cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        kwargs = kwargs or {}
        info = _op_info(func)
        if info.watched and _observer is not None:
            _observer.saw(info.name, args, kwargs)
        seen: list[int] = []
        cpu_operands: list[torch.Tensor] = []

        def unwrap(x: torch.Tensor) -> torch.Tensor:
            if isinstance(x, NeuronTensor):
                seen.append(x.device.index or 0)
                return x._elem
            if x.device.type == "neuron":
                # A FakeTensor made by a neuron factory while Dynamo traces (FakeTensorMode
                # builds factories itself): stand in a CPU fake of the same metadata.
                seen.append(x.device.index or 0)
                return x.to("cpu")
            if x.dim() > 0:
                cpu_operands.append(x)
            return x

        cargs = map_tensors(unwrap, args)
        ckwargs = map_tensors(unwrap, kwargs)
        index = seen[0] if seen else state.current_device()
        if not info.mixed_ok:
            _check_same_device(info.name, seen, cpu_operands)

        wrap_out = True
        positional = 0 <= info.device_arg < len(cargs)
        target = cargs[info.device_arg] if positional else ckwargs.get("device")
        if target is not None:
            target = torch.device(target)
            if target.type == "neuron":
                index = target.index if target.index is not None else state.current_device()
                if positional:
                    cargs = (*cargs[: info.device_arg], _CPU, *cargs[info.device_arg + 1 :])
                else:
                    ckwargs["device"] = _CPU
            else:
                wrap_out = False

        if info.random:
            out = _run_seeded(func, info, index, cargs, ckwargs)
        else:
            out = func(*cargs, **ckwargs)

        if info.write_returns is not None:
            return _written_inputs(info, args, kwargs, out)
        if not wrap_out:
            return out
        if getattr(func, "is_view", False) and torch.is_inference_mode_enabled() and not _all_inference(args):
            # A view of a normal tensor taken under inference mode is a normal tensor (autograd sets
            # its version counter): its wrapper must not be made as an inference tensor.
            with torch.inference_mode(False):
                return map_tensors(lambda t: cls(t, index), out)
        return map_tensors(lambda t: cls(t, index), out)


def _all_inference(args: tuple) -> bool:
    """Every device tensor among ``args`` is an inference tensor (made under inference mode)."""
    found: list[bool] = []

    def note(t: torch.Tensor) -> torch.Tensor:
        found.append(t.is_inference())
        return t

    map_tensors(note, args)
    return all(found)


def _check_same_device(op: str, seen: list[int], cpu_operands: list[torch.Tensor]) -> None:
    """Raise the error a real accelerator raises when one op mixes devices."""
    if not seen:
        return
    first = seen[0]
    for idx in seen:
        if idx != first:
            raise RuntimeError(
                "Expected all tensors to be on the same device, but found at least two devices, "
                f"neuron:{first} and neuron:{idx}! (when checking argument for {op})"
            )
    if cpu_operands:
        raise RuntimeError(
            "Expected all tensors to be on the same device, but found at least two devices, "
            f"neuron:{first} and cpu! (when checking argument for {op})"
        )


def _run_seeded(func: Callable, info: _OpInfo, index: int, args: Any, kwargs: dict) -> Any:
    """Run a random op from the simulated core's (seed, offset) generator (``simulator.rng``).

    An explicit ``torch.Generator(device="neuron")`` is drawn from and advanced the same way; any
    other explicit ``generator=`` is the caller's and is used as given.
    """
    explicit = kwargs.get("generator") if info.generator_arg else None
    if explicit is not None:
        if explicit.device.type != "neuron":
            return func(*args, **kwargs)
        offset = explicit.get_offset()
        kwargs["generator"] = rng.cpu_generator_at(explicit.initial_seed(), offset)
        out = func(*args, **kwargs)
        explicit.set_offset(rng.advanced(offset, sum(t.numel() for t in _tensors(out))))
        return out
    core = state.generator(index)
    gen = core.cpu_generator()
    if info.generator_arg:
        kwargs["generator"] = gen
        out = func(*args, **kwargs)
    else:
        cpu_state = torch.default_generator.get_state()
        torch.default_generator.set_state(gen.get_state())
        try:
            out = func(*args, **kwargs)
        finally:
            torch.default_generator.set_state(cpu_state)
    core.advance(sum(t.numel() for t in _tensors(out)))
    return out


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def _written_inputs(info: _OpInfo, args: tuple, kwargs: dict, out: Any) -> Any:
    """In-place and out= ops return the caller's own tensors, so aliasing is preserved."""
    results = []
    outs = out if isinstance(out, tuple) else (out,)
    for produced, target in zip(outs, info.write_returns or ()):
        if target is None:
            results.append(produced)
            continue
        pos, name = target
        results.append(args[pos] if pos < len(args) else kwargs[name])
    return tuple(results) if isinstance(out, tuple) else results[0]


def wrap(elem: torch.Tensor, index: int | None = None) -> NeuronTensor:
    """Place a CPU tensor on simulated core ``index`` (the current core when None)."""
    return NeuronTensor(elem, state.current_device() if index is None else index)
