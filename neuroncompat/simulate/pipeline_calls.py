"""Per diffusers pipeline call: its parameters and what Neuron compiled during it, for ``neuroncompat simulate``.

A diffusion pipeline compiles its graphs on the first denoising step and, if its shapes are static, never
again: the denoiser's input shape is the same every step and the timestep is a 0-d tensor (measured on the
simulator, ``docs/gaps.md#diffusers-dry-run``). What makes new graphs is the call: height/width, batch x
``num_images_per_prompt``, classifier-free guidance switched on or off (it doubles the denoiser batch), the
prompt's token length where embeddings are padded only to the longest prompt (QwenImage). So each call is
recorded with those parameters and each graph and new eager forward shape with the point of the call it
came from: before denoising, denoising step *k*, or after the loop (``vae.decode``). A graph after step 1
is a bug the report shows; the report (:mod:`~neuroncompat.simulate.pipeline_report`) names the parameter
behind each recompile.

The recorder wraps the ``__call__`` of every ``DiffusionPipeline`` subclass (``__init_subclass__`` for the
ones diffusers imports lazily later) and, for the length of the outermost call only, hooks the pipeline's
own instances: a forward pre-hook on the denoiser (``unet``/``transformer``) and on the text encoders, and
instance wrappers of ``scheduler.step`` (step boundaries) and ``prepare_latents`` (a hash of the initial
latents, so tensor-parallel ranks can be shown to draw the same noise). Everything is restored when the call
returns; a pipeline called outside a dry run is never touched.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import torch

from neuroncompat import hooks
from neuroncompat.simulate.locations import current_caller, shorten_location
from neuroncompat.simulator import compile_backend
from neuroncompat.simulator.compile_backend import CompiledGraph

# Bounds: calls recorded per process, events per call (beyond them only counts grow).
MAX_CALLS = 64
MAX_EVENTS = 256
_DENOISERS = ("unet", "transformer", "transformer_2")
_PIPELINE_MODULE = "diffusers.pipelines.pipeline_utils"
_WRAPPED = "_neuroncompat_pipeline_call"


class _Call:
    """One outermost pipeline call being recorded."""

    def __init__(self, index: int, pipeline: Any, user: str | None) -> None:
        self.index = index
        self.pipeline = type(pipeline).__name__
        self.instance = id(pipeline)
        self.user = user
        self.denoiser_calls = 0
        self.current_step = 0  # the denoising step whose denoiser forward ran last (0: none yet)
        self.steps_done = 0
        self.prompt_length: int | None = None
        self.latents: str | None = None
        self.size: tuple[Any, Any] = (None, None)  # the height and width prepare_latents got
        self.text_encoder_calls: dict[str, int] = {}
        # (kind, what, ops, current step, scheduler steps done so far)
        self.events: list[tuple[str, str, int, int, int]] = []
        self.dropped = 0

    def add(self, kind: str, what: str, ops: int) -> None:
        if len(self.events) < MAX_EVENTS:
            self.events.append((kind, what, ops, self.current_step, self.steps_done))
        else:
            self.dropped += 1

    def phase_of(self, step: int, steps_done: int) -> tuple[str, int | None]:
        """``("before", None)``, ``("step", k)`` or ``("after", None)``, known once the call has ended.

        An event belongs to the step whose denoiser forward ran last (a step-end callback included), to
        "after" once the last scheduler step is done (``vae.decode``; the last step's callback too), and
        to "before" ahead of the first denoiser forward (the text encoders). A pipeline whose denoiser
        was not found counts scheduler steps instead."""
        if self.steps_done > 0 and steps_done >= self.steps_done:
            return "after", None
        if step == 0 and self.denoiser_calls > 0:
            return "before", None
        return "step", step or steps_done + 1


class PipelineCalls:
    """Records diffusers pipeline calls in this process (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._local = threading.local()
        self._calls: list[dict[str, Any]] = []
        self._dropped = 0
        self._seen_eager: set[tuple[str, Any]] = set()
        self._decode_ops: dict[int, int] = {}  # id(vae) -> ops of its last compiled decode graph
        self._wrapped: list[tuple[type, Callable[..., Any]]] = []
        self._subclass_hook: tuple[type, Any] | None = None
        self._active = False

    # -- installation ----------------------------------------------------------------------------
    def start(self) -> Callable[[], None]:
        """Wrap the pipelines' ``__call__`` once diffusers is imported; returns the undo."""
        self._active = True
        hooks.when_imported(_PIPELINE_MODULE, self._install)
        return self.stop

    def stop(self) -> None:
        self._active = False
        for cls, original in self._wrapped:
            if getattr(cls.__dict__.get("__call__"), _WRAPPED, None) is original:
                cls.__call__ = original  # type: ignore[method-assign]
        self._wrapped = []
        if self._subclass_hook is not None:
            base, previous = self._subclass_hook
            if previous is None:
                delattr(base, "__init_subclass__")
            else:
                base.__init_subclass__ = previous  # type: ignore[method-assign]
            self._subclass_hook = None

    def _install(self, module: ModuleType) -> None:
        if not self._active:
            return
        base = module.DiffusionPipeline
        pending = [base]
        while pending:
            cls = pending.pop()
            self._wrap(cls)
            pending.extend(cls.__subclasses__())
        previous = base.__dict__.get("__init_subclass__")
        wrap = self._wrap

        def __init_subclass__(cls: Any, **kwargs: Any) -> None:
            if previous is None:
                super(base, cls).__init_subclass__(**kwargs)
            else:
                previous.__func__(cls, **kwargs)
            wrap(cls)

        base.__init_subclass__ = classmethod(__init_subclass__)
        self._subclass_hook = (base, previous)

    def _wrap(self, cls: type) -> None:
        original = cls.__dict__.get("__call__")
        if original is None or hasattr(original, _WRAPPED):
            return
        run = self._run

        @functools.wraps(original)
        def __call__(pipe: Any, *args: Any, **kwargs: Any) -> Any:
            return run(pipe, original, args, kwargs)

        setattr(__call__, _WRAPPED, original)
        cls.__call__ = __call__  # type: ignore[method-assign]
        self._wrapped.append((cls, original))

    # -- one call --------------------------------------------------------------------------------
    def _current(self) -> _Call | None:
        return getattr(self._local, "call", None)

    def _run(self, pipe: Any, original: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._current() is not None or len(self._calls) >= MAX_CALLS:
            if self._current() is None:
                self._dropped += 1
            return original(pipe, *args, **kwargs)  # a pipeline calling another is part of the outer call
        arguments = _arguments(original, (pipe, *args), kwargs)
        call = _Call(len(self._calls) + 1, pipe, current_caller()[1])
        self._local.call = call
        failed = True
        try:
            with _hooked(pipe, call):
                result = original(pipe, *args, **kwargs)
            failed = False
            return result
        finally:
            self._local.call = None
            self._finish(pipe, call, arguments, failed)

    def _finish(self, pipe: Any, call: _Call, arguments: dict[str, Any], failed: bool) -> None:
        vae = getattr(pipe, "vae", None)
        events = []
        for kind, what, ops, current_step, steps_done in call.events:
            phase, step = call.phase_of(current_step, steps_done)
            events.append({"kind": kind, "what": what, "ops": ops, "phase": phase, "step": step})
            if vae is not None and kind == "graph" and phase == "after" and _is_decode(what):
                self._decode_ops[id(vae)] = ops
        record = {
            "index": call.index,
            "pipeline": call.pipeline,
            "instance": call.instance,
            "user": call.user,
            "failed": failed,
            "params": {**_params(pipe, arguments, call.size), "prompt_length": call.prompt_length},
            "steps_run": call.steps_done,
            "denoiser_calls": call.denoiser_calls,
            "events": events,
            "dropped_events": call.dropped,
            "latents": call.latents,
            "vae": _vae_state(vae, arguments, self._decode_ops.get(id(vae))) if vae is not None else None,
            "text_encoders": _text_encoders(pipe, call.text_encoder_calls),
        }
        with self._lock:
            self._calls.append(record)

    # -- events from the recorder ---------------------------------------------------------------
    def on_graph(self, graph: CompiledGraph) -> None:
        call = self._current()
        if call is not None:
            call.add("graph", shorten_location(graph.code), graph.ops)

    def on_eager(self, module: str, signature: Any) -> None:
        """An outermost module call on the device: a new (module, input shapes) is a new eager compilation."""
        key = (module, signature)
        with self._lock:
            new = key not in self._seen_eager
            self._seen_eager.add(key)
        call = self._current()
        if new and call is not None:
            call.add("eager", module, 0)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"calls": [dict(c) for c in self._calls], "dropped_calls": self._dropped}


@contextmanager
def _hooked(pipe: Any, call: _Call) -> Iterator[None]:
    """The per-call hooks on ``pipe``'s own objects, removed on the way out."""
    undo: list[Callable[[], None]] = []
    try:
        denoiser = next(
            (getattr(pipe, n, None) for n in _DENOISERS if isinstance(getattr(pipe, n, None), torch.nn.Module)), None
        )
        if denoiser is not None:
            undo.append(denoiser.register_forward_pre_hook(_denoiser_hook(call), with_kwargs=True).remove)
        for name, module in _components(pipe):
            if name.startswith("text_encoder"):
                call.text_encoder_calls[name] = 0
                undo.append(module.register_forward_pre_hook(_count_hook(call, name)).remove)
        scheduler = getattr(pipe, "scheduler", None)
        if scheduler is not None and callable(getattr(scheduler, "step", None)):
            undo.append(_instance_wrap(scheduler, "step", _after(lambda _: _stepped(call))))
        if callable(getattr(pipe, "prepare_latents", None)):
            undo.append(_instance_wrap(pipe, "prepare_latents", _prepare_latents(call)))
        yield
    finally:
        for remove in reversed(undo):
            remove()


def _denoiser_hook(call: _Call) -> Callable[..., None]:
    def hook(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        call.denoiser_calls += 1
        call.current_step = call.steps_done + 1
        if call.prompt_length is None:
            text = kwargs.get("encoder_hidden_states", args[2] if len(args) > 2 else None)
            if isinstance(text, torch.Tensor) and text.dim() >= 2:
                call.prompt_length = int(text.shape[1])

    return hook


def _count_hook(call: _Call, name: str) -> Callable[..., None]:
    def hook(module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        call.text_encoder_calls[name] += 1

    return hook


def _stepped(call: _Call) -> None:
    call.steps_done += 1


def _prepare_latents(call: _Call) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``prepare_latents`` is where the pipeline has settled the image size (SD resets both sides to the
    default when one is missing) and draws the noise: its ``height``/``width`` and a hash of the latents it
    returns (Flux returns them with their position ids) are recorded from its first call."""

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if call.latents is None:
                arguments = _arguments(original, args, kwargs)
                call.size = (_number(arguments.get("height")), _number(arguments.get("width")))
                items = result if isinstance(result, (tuple, list)) else (result,)
                tensor = next((item for item in items if isinstance(item, torch.Tensor)), None)
                if tensor is not None:
                    data = tensor.detach().to("cpu").contiguous()
                    call.latents = hashlib.sha256(data.view(torch.uint8).numpy().tobytes()).hexdigest()[:16]
            return result

        return wrapper

    return wrap


def _after(then: Callable[[Any], None]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            then(result)
            return result

        return wrapper

    return wrap


def _instance_wrap(
    owner: Any, name: str, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]
) -> Callable[[], None]:
    """Set ``owner.name`` to ``wrap(owner.name)`` on the instance; the undo puts back what was there."""
    had = name in vars(owner)
    previous = vars(owner).get(name)
    setattr(owner, name, wrap(getattr(owner, name)))

    def undo() -> None:
        if had:
            setattr(owner, name, previous)
        else:
            delattr(owner, name)

    return undo


def _components(pipe: Any) -> list[tuple[str, torch.nn.Module]]:
    try:
        components = pipe.components
    except Exception:  # a pipeline whose config names a component it does not have
        return []
    return [(name, value) for name, value in components.items() if isinstance(value, torch.nn.Module)]


_signatures: dict[Callable[..., Any], inspect.Signature] = {}


def _arguments(original: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a call of ``original`` by name, defaults filled in (empty where they do not bind: the
    call will raise). ``args`` starts with the pipeline for a function, not for a bound method."""
    key = getattr(original, "__func__", original)  # a bound method is a new object at each access
    signature = _signatures.get(key)
    if signature is None:
        signature = _signatures[key] = inspect.signature(original)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return {}
    bound.apply_defaults()
    extra = bound.arguments.pop("kwargs", {})
    return {**bound.arguments, **(extra if isinstance(extra, dict) else {})}


def _first(*values: Any) -> Any:
    return next((value for value in values if value is not None), None)


def _number(value: Any) -> float | int | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _default_size(pipe: Any) -> int | None:
    size = getattr(pipe, "default_sample_size", None)
    if size is None:
        unet = getattr(pipe, "unet", None)
        size = getattr(getattr(unet, "config", None), "sample_size", None)
    scale = getattr(pipe, "vae_scale_factor", 1)
    return size * scale if isinstance(size, int) and isinstance(scale, int) else None


def _batch(arguments: dict[str, Any]) -> int | None:
    prompt = arguments.get("prompt")
    if isinstance(prompt, str):
        return 1
    if isinstance(prompt, (list, tuple)):
        return len(prompt)
    embeds = arguments.get("prompt_embeds")
    return int(embeds.shape[0]) if isinstance(embeds, torch.Tensor) else None


def _cfg(pipe: Any, arguments: dict[str, Any]) -> bool | None:
    """Whether the call ran classifier-free guidance (the denoiser batch doubled, or a second forward)."""
    if "true_cfg_scale" in arguments:  # Flux, QwenImage: guidance_scale is an embedding, not CFG
        scale = _number(arguments["true_cfg_scale"])
        negative = arguments.get("negative_prompt") is not None or arguments.get("negative_prompt_embeds") is not None
        return scale is not None and scale > 1 and negative
    if isinstance(getattr(type(pipe), "do_classifier_free_guidance", None), property):
        try:
            return bool(pipe.do_classifier_free_guidance)
        except Exception:  # read before the call set _guidance_scale (the call failed early)
            pass
    scale = _number(arguments.get("guidance_scale"))
    return None if scale is None else scale > 1


def _params(pipe: Any, arguments: dict[str, Any], prepared: tuple[Any, Any]) -> dict[str, Any]:
    """The call's parameters; the size is the one ``prepare_latents`` got, else the one asked for (or the
    pipeline's default)."""
    height, width = _number(arguments.get("height")), _number(arguments.get("width"))
    default = _default_size(pipe)
    return {
        "height": _first(prepared[0], height, default),
        "width": _first(prepared[1], width, default),
        "default_size": height is None and width is None,
        "batch": _batch(arguments),
        "num_images_per_prompt": _number(arguments.get("num_images_per_prompt")) or 1,
        "cfg": _cfg(pipe, arguments),
        "guidance_scale": _number(arguments.get("guidance_scale")),
        "true_cfg_scale": _number(arguments.get("true_cfg_scale")),
        "steps": _number(arguments.get("num_inference_steps")),
        "max_sequence_length": _number(arguments.get("max_sequence_length")),
        "output_type": arguments.get("output_type") if isinstance(arguments.get("output_type"), str) else None,
    }


def _is_decode(code: str) -> bool:
    """Whether a compiled function (``path:line (Class.function)``) is a VAE's ``decode``."""
    return code.endswith(".decode)") or code.endswith("(decode)")


def _compiled(function: Any) -> bool:
    return hasattr(function, "_torchdynamo_orig_callable")


def _vae_state(vae: Any, arguments: dict[str, Any], decode_ops: int | None) -> dict[str, Any]:
    decode = getattr(vae, "decode", None)
    return {
        "decode_ran": arguments.get("output_type") != "latent",
        "decode_compiled": _compiled(decode),
        "module_compiled": compile_backend.is_compiled_module(vae),
        "decode_ops": decode_ops,
        "tiling": bool(getattr(vae, "use_tiling", False)),
        "slicing": bool(getattr(vae, "use_slicing", False)),
        "device": _device(vae),
    }


def _device(module: Any) -> str | None:
    parameter = next(module.parameters(), None) if isinstance(module, torch.nn.Module) else None
    return None if parameter is None else str(parameter.device)


def _text_encoders(pipe: Any, calls: dict[str, int]) -> list[dict[str, Any]]:
    return [
        {"name": name, "device": _device(module), "calls": calls.get(name, 0)}
        for name, module in _components(pipe)
        if name.startswith("text_encoder")
    ]
