"""The first training step (or generation) of a running script, found and traced: where it starts, where each
phase ends, and the stop once the optimizer has stepped (or the first token is decoded).

The script runs as it is; this module only watches. The step starts at the first call of a fake model
(:mod:`.script_model`) with gradients on and the model in training mode: there the plan's fake mode, MemTracker
(as ``plan MODEL`` uses it, :mod:`.trace`), the largest-tensor recorder and the value-read guard
(:mod:`.script_reads`) are entered. The forward ends at the first ``backward``, the backward when the optimizer
is about to step, the optimizer phase when it has, and then :class:`ScriptStop` ends the script. Inside
``generate`` (gradients off, the model in eval mode) the first call of a fake model is the prefill and the second
the first decode step, after which the script is stopped: the step ``plan --task generate`` plans. A script that
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
from neuroncompat.plan.step import GENERATE_PHASES, TRAIN_PHASES

_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def _checkpointing(module: torch.nn.Module) -> bool:
    """Whether the script turned on gradient checkpointing (transformers' newer name first: the older warns)."""
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(module), name):
            return bool(getattr(module, name))
    return False


def _new_tokens(model: torch.nn.Module, kwargs: dict[str, Any], ids: Any) -> int:
    """How many tokens the script's ``generate`` asks for: ``max_new_tokens``, else the generation config's, else
    what ``max_length`` leaves after the prompt (at least 1: a plan of one decode step)."""
    config = kwargs.get("generation_config") or getattr(model, "generation_config", None)
    new = kwargs.get("max_new_tokens") or getattr(config, "max_new_tokens", None)
    if new is None:
        prompt = ids.shape[-1] if isinstance(ids, torch.Tensor) else 0
        new = (kwargs.get("max_length") or getattr(config, "max_length", None) or prompt + 1) - prompt
    return max(int(new), 1)


class StepWatch:
    """One script's first training step or generation: started, traced phase by phase, then the script stopped."""

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
        self.task = "train"
        self.generating: list[dict[str, Any]] = []  # the keyword arguments of each generate call in progress
        self.forwards = 0
        self.cache: Any = None
        self._modes = contextlib.ExitStack()

    # the step's boundaries

    def _start(self, module: torch.nn.Module, args: tuple, kwargs: dict, task: str) -> None:
        real = [name for name, p in module.named_parameters() if not isinstance(p, FakeTensor)]
        if real:
            raise ScriptStop(
                stopped_at(
                    self.script,
                    reader(),
                    f"the model's parameter {real[0]} is a real tensor, added after from_pretrained/from_config and "
                    "not by peft; the plan makes a model's parameters fake only where they come from its config or "
                    "are peft's adapters",
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
        if task == "generate":
            self.observed["max_new_tokens"] = _new_tokens(module, self.generating[-1], ids)
        self.task = task
        self.model = module
        self.tracker = traced._tracker(module, None, ids if isinstance(ids, torch.Tensor) else torch.empty(0))
        inputs = [t for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor) and t is not ids]
        if inputs:  # the attention mask, the labels when they are a tensor of their own
            self.tracker.track_external(*inputs)
        self.largest.phase = self._phases[0]
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

    @property
    def _phases(self) -> tuple[str, ...]:
        return GENERATE_PHASES if self.task == "generate" else TRAIN_PHASES

    def _end(self, phase: str) -> None:
        if phase in self.phase_peaks:
            return
        self.phase_peaks[phase] = traced._peak(self.tracker)[0]
        index = self._phases.index(phase)
        self.largest.phase = self._phases[min(index + 1, len(self._phases) - 1)]

    def _generated(self, kwargs: dict) -> None:
        """A generation's model call has returned: the prefill, then the first decode step, which ends the plan."""
        self.forwards += 1
        if self.forwards == 1:
            self._end("prefill")
            self.tracker.reset_mod_stats()  # MemTracker takes a second forward only once the first's are cleared
            return
        self.cache = kwargs.get("past_key_values")
        self._end("decode")
        self.done = True
        self.stopped_at_line = script_line(self.script, reader())
        raise ScriptStop()

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
            if watch.model is None and is_fake_model(module, watch.mode):
                if module.training and torch.is_grad_enabled():
                    watch._start(module, args, kwargs, "train")
                elif watch.generating and not torch.is_grad_enabled():
                    watch._start(module, args, kwargs, "generate")
            elif module is watch.model and "forward" in watch.phase_peaks:
                # gradient accumulation: another micro-batch before the optimizer steps, which MemTracker takes
                # only once the previous forward's per-module figures are cleared (the step's peak is kept)
                watch.tracker.reset_mod_stats()
            elif watch.model is not None and module is not watch.model and "autocast" not in watch.observed:
                watch._observe_autocast()
            out = call(module, *args, **kwargs)
            if module is watch.model and watch.task == "generate":
                watch._generated(kwargs)
            return out

        def backward_called(*args: Any, **kwargs: Any) -> Any:
            if watch.model is None:
                watch._unseen("backward() was called")
            watch._end("forward")
            return backward(*args, **kwargs)

        def guard(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
            if watch.model is None:
                watch._unseen("the optimizer stepped")

        from transformers.generation.utils import GenerationMixin

        generate = GenerationMixin.generate

        def generate_called(model: Any, *args: Any, **kwargs: Any) -> Any:
            watch.generating.append(kwargs)
            try:
                return generate(model, *args, **kwargs)
            finally:
                watch.generating.pop()

        handle = register_optimizer_step_pre_hook(guard)
        torch.nn.Module.__call__ = called  # type: ignore[method-assign]
        torch.autograd.backward = backward_called
        GenerationMixin.generate = generate_called
        try:
            yield self
        finally:
            torch.nn.Module.__call__ = call  # type: ignore[method-assign]
            torch.autograd.backward = backward
            GenerationMixin.generate = generate
            handle.remove()
            self._modes.close()
