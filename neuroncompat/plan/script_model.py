"""A script's models built from their configs on fake tensors: ``from_pretrained`` reads ``config.json`` only.

``plan -- python train.py`` runs the user's script as it is, so its model must be full size and cost nothing.
While the plan runs, transformers' two ways of making a model, ``PreTrainedModel.from_pretrained`` and
``_from_config`` (behind ``AutoModel*.from_config``), build it from the config inside the plan's
``FakeTensorMode``: every parameter is a fake tensor of its full shape, no checkpoint file is opened. The script's
data stays real (the mode is not active between the script's lines), and real tensors meeting the fake model are
turned fake by the mode (``allow_non_fake_inputs``).

One of torch's own paths needs help: ``Module.to`` / ``.half()`` / ``.cuda()`` (``Module._apply``) *swaps* a fake
parameter for its converted copy, and torch refuses the swap while the fake mode holds a weak reference to it
(neuroncompat/plan/lora.py met the same). A module holding fake parameters is converted by putting new
parameters in place instead, tied parameters kept tied, which is what ``_apply`` does for a plain tensor.

peft's adapters (``get_peft_model``, ``model.add_adapter``) are made on a fake model inside the same mode, so they
are fake too, full size and free: peft builds them with ``nn.Linear`` between the script's lines, where they would
be real tensors beside a fake base (and a real optimizer state), so its ``BaseTuner.inject_adapter`` runs in the
fake mode when the model it adapts is fake. peft's own moves and casts of the new adapters (``Module.to``) then
take the path above.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from neuroncompat.plan import config as model_config
from neuroncompat.plan.settings import PlanInputError


@dataclass
class Built:
    """The models the script built while the plan ran, and the ``config.json`` each was built from."""

    models: list[torch.nn.Module] = field(default_factory=list)
    configs: list[Path] = field(default_factory=list)
    names: list[str] = field(default_factory=list)


def is_fake_model(module: torch.nn.Module, mode: FakeTensorMode) -> bool:
    """Whether ``module`` holds the plan's fake parameters (its first one is enough: they are all made alike)."""
    param = next(module.parameters(), None)
    return isinstance(param, FakeTensor) and param.fake_mode is mode


def _dtype(value: Any, config: Any) -> torch.dtype | None:
    """``from_pretrained``'s ``dtype`` (or the older ``torch_dtype``): a torch dtype, its name, or "auto"."""
    if value is None:
        return None
    if value == "auto":
        value = getattr(config, "dtype", None) or torch.float32
    if isinstance(value, str):
        value = getattr(torch, value)
    return value if isinstance(value, torch.dtype) else None


def _apply_to_fakes(module: torch.nn.Module, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.nn.Module:
    """``Module._apply`` for a module holding fake tensors: converted parameters put in place, not swapped."""
    made: dict[int, torch.Tensor] = {}
    for sub in module.modules():
        for name, param in sub._parameters.items():
            if param is not None:
                if id(param) not in made:
                    with torch.no_grad():
                        converted = fn(param)
                    made[id(param)] = (
                        param if converted is param else torch.nn.Parameter(converted, param.requires_grad)
                    )
                sub._parameters[name] = made[id(param)]  # type: ignore[assignment]
        for name, buffer in sub._buffers.items():
            if buffer is not None:
                sub._buffers[name] = fn(buffer)
    return module


@contextlib.contextmanager
def fake_models(mode: FakeTensorMode) -> Iterator[Built]:
    """While entered, the script's transformers models are built from their configs in ``mode`` (above)."""
    from transformers import PretrainedConfig, PreTrainedModel

    built = Built()
    from_pretrained = PreTrainedModel.__dict__["from_pretrained"]
    from_config = PreTrainedModel.__dict__["_from_config"]
    apply = torch.nn.Module._apply

    def fake_from_config(cls: Any, config: Any, **kwargs: Any) -> Any:
        with mode:
            model = from_config.__func__(cls, config, **kwargs)
        built.models.append(model)
        return model

    def config_only(cls: Any, name: Any, *model_args: Any, config: Any = None, **kwargs: Any) -> Any:
        try:
            path, read = model_config.read(str(name))
        except PlanInputError as exc:
            raise PlanInputError(f"from_pretrained({str(name)!r}): {exc}") from exc
        if not isinstance(config, PretrainedConfig):
            config = read
        options = {"dtype": _dtype(kwargs.get("dtype", kwargs.get("torch_dtype")), config)}
        if kwargs.get("attn_implementation") is not None:
            options["attn_implementation"] = kwargs["attn_implementation"]
        model = cls._from_config(config, **options)
        model.eval()  # as from_pretrained leaves it
        built.configs.append(path)
        built.names.append(str(name))
        return model

    def converted(self: torch.nn.Module, fn: Any, recurse: bool = True) -> torch.nn.Module:
        if is_fake_model(self, mode):
            return _apply_to_fakes(self, fn)
        return apply(self, fn, recurse)

    PreTrainedModel.from_pretrained = classmethod(config_only)
    PreTrainedModel._from_config = classmethod(fake_from_config)
    torch.nn.Module._apply = converted  # type: ignore[method-assign]
    try:
        with _fake_adapters(mode):
            yield built
    finally:
        PreTrainedModel.from_pretrained = from_pretrained
        PreTrainedModel._from_config = from_config
        torch.nn.Module._apply = apply  # type: ignore[method-assign]


@contextlib.contextmanager
def _fake_adapters(mode: FakeTensorMode) -> Iterator[None]:
    """While entered, peft adds its adapters to a fake model in ``mode`` (module docstring); nothing where peft is
    not installed."""
    if importlib.util.find_spec("peft") is None:
        yield
        return
    from peft.tuners.tuners_utils import BaseTuner

    inject = BaseTuner.inject_adapter

    def injected(self: Any, model: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
        if not is_fake_model(model, mode):
            return inject(self, model, *args, **kwargs)
        with mode:
            return inject(self, model, *args, **kwargs)

    BaseTuner.inject_adapter = injected  # type: ignore[method-assign]
    try:
        yield
    finally:
        BaseTuner.inject_adapter = inject  # type: ignore[method-assign]
