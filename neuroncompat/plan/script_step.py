"""The first training step of a running script, found and traced: where it starts, where each phase ends, and the
stop once the optimizer has stepped.

The script runs as it is; this module only watches. The step starts at the first call of a fake model
(:mod:`.script_model`) with gradients on and the model in training mode: there the plan's fake mode, MemTracker
(as ``plan MODEL`` uses it, :mod:`.trace`), the largest-tensor recorder and the value-read guard
(:mod:`.script_reads`) are entered. The forward ends at the first ``backward``, the backward when the optimizer
is about to step, the optimizer phase when it has, and then :class:`ScriptStop` ends the script. A script that
steps an optimizer or calls ``backward`` before any fake model ran (a model built another way) is stopped there,
since what it trains is real and would cost real memory and time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from neuroncompat.plan import trace as traced
from neuroncompat.plan.largest import LargestTensors
from neuroncompat.plan.script_model import is_fake_model
from neuroncompat.plan.script_reads import ScriptStop, ValueReads, reader, script_line, stopped_at
from neuroncompat.plan.step import TRAIN_PHASES

_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def _checkpointing(module: torch.nn.Module) -> bool:
    """Whether the script turned on gradient checkpointing (transformers' newer name first: the older warns)."""
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(module), name):
            return bool(getattr(module, name))
    return False


class StepWatch:
    """One script's first training step: started, traced phase by phase, then the script stopped."""

    def __init__(self, mode: FakeTensorMode, script: Path) -> None:
        self.mode = mode
        self.script = script
        self.model: torch.nn.Module | None = None
        self.done = False
        self.phase_peaks: dict[str, int] = {}
        self.observed: dict[str, Any] = {}
        self.largest = LargestTensors()
        self.reads = ValueReads(script)
        self.tracker: Any = None
        self.stopped_at_line: str | None = None
        self._modes = contextlib.ExitStack()

    # the step's boundaries

    def _start(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        real = [name for name, p in module.named_parameters() if not isinstance(p, FakeTensor)]
        if real:
            raise ScriptStop(
                stopped_at(
                    self.script,
                    reader(),
                    f"the model's parameter {real[0]} is a real tensor, made after from_pretrained/from_config "
                    "(peft's adapters are); this version plans a model whose parameters all come from its config",
                )
            )
        ids = kwargs.get("input_ids")
        if not isinstance(ids, torch.Tensor):
            ids = next((a for a in args if isinstance(a, torch.Tensor)), None)
        param = next(module.parameters())
        self.observed = {
            "batch": tuple(ids.shape) if isinstance(ids, torch.Tensor) else None,
            "dtype": _NAMES.get(param.dtype, str(param.dtype).removeprefix("torch.")),
            "gradient_checkpointing": _checkpointing(module),
        }
        self.model = module
        self.tracker = traced._tracker(module, None, ids if isinstance(ids, torch.Tensor) else torch.empty(0))
        inputs = [t for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor) and t is not ids]
        if inputs:  # the attention mask, the labels when they are a tensor of their own
            self.tracker.track_external(*inputs)
        self.largest.phase = TRAIN_PHASES[0]
        self._modes.enter_context(self.mode)
        self._modes.enter_context(self.tracker)
        self._modes.enter_context(self.largest)
        self._modes.enter_context(self.reads)
        self._modes.callback(register_optimizer_step_pre_hook(self._before_step).remove)
        self._modes.callback(register_optimizer_step_post_hook(self._after_step).remove)

    def _observe_autocast(self) -> None:
        """The autocast the forward runs in, seen at the model's first layer: a wrapper can enter it inside the
        model's own call (accelerate wraps ``forward`` in ``torch.autocast`` for Trainer's ``bf16=True``)."""
        enabled = torch.is_autocast_enabled("cpu")
        self.observed["autocast"] = _NAMES.get(torch.get_autocast_dtype("cpu")) if enabled else None

    def _end(self, phase: str) -> None:
        if phase in self.phase_peaks:
            return
        self.phase_peaks[phase] = traced._peak(self.tracker)[0]
        index = TRAIN_PHASES.index(phase)
        self.largest.phase = TRAIN_PHASES[min(index + 1, len(TRAIN_PHASES) - 1)]

    def _before_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self._end("forward")
        self._end("backward")
        self.observed["optimizer"] = type(optimizer).__name__.lower()

    def _after_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self._end("optimizer")
        self.done = True
        self.stopped_at_line = script_line(self.script, reader())
        raise ScriptStop()

    def _unseen(self, what: str) -> None:
        """Stop a script that trains something the plan did not build (its first step would run for real)."""
        raise ScriptStop(
            stopped_at(
                self.script,
                reader(),
                f"{what} before any model built by from_pretrained or from_config ran a training forward; the plan "
                "builds only those on fake tensors, and will not run a real model's step",
            )
        )

    @contextlib.contextmanager
    def watching(self) -> Iterator[StepWatch]:
        """While entered, the first training call of a fake model starts the step (module docstring)."""
        call = torch.nn.Module.__call__
        backward = torch.autograd.backward
        watch = self

        def called(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            if watch.done:
                raise ScriptStop()  # the script caught the stop and went on: stop it again
            if (
                watch.model is None
                and module.training
                and torch.is_grad_enabled()
                and is_fake_model(module, watch.mode)
            ):
                watch._start(module, args, kwargs)
            elif module is watch.model and "forward" in watch.phase_peaks:
                # gradient accumulation: another micro-batch before the optimizer steps, which MemTracker takes
                # only once the previous forward's per-module figures are cleared (the step's peak is kept)
                watch.tracker.reset_mod_stats()
            elif watch.model is not None and module is not watch.model and "autocast" not in watch.observed:
                watch._observe_autocast()
            return call(module, *args, **kwargs)

        def backward_called(*args: Any, **kwargs: Any) -> Any:
            if watch.model is None:
                watch._unseen("backward() was called")
            watch._end("forward")
            return backward(*args, **kwargs)

        def guard(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
            if watch.model is None:
                watch._unseen("the optimizer stepped")

        handle = register_optimizer_step_pre_hook(guard)
        torch.nn.Module.__call__ = called  # type: ignore[method-assign]
        torch.autograd.backward = backward_called
        try:
            yield self
        finally:
            torch.nn.Module.__call__ = call  # type: ignore[method-assign]
            torch.autograd.backward = backward
            handle.remove()
            self._modes.close()
