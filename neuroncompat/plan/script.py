"""``neuroncompat plan -- python train.py ARGS...``: the user's own script, run up to its first optimizer step (or
its first decode step in ``generate``) with its models on fake tensors, planned as ``plan MODEL`` plans a step and
reported the same way.

The script runs in this process (``runpy``, with its own ``sys.argv``), its prints sent to stderr so stdout holds
the report alone. Its data loading, tokenizer and Trainer set-up are real; its models are full size and fake
(:mod:`.script_model`: ``from_pretrained`` reads ``config.json`` only); its first training step is found and
traced under MemTracker (:mod:`.script_step`), and then the script is stopped. Where that cannot work the plan
exits 2 naming the script's line and the cause (:class:`PlanInputError`): a read of a tensor's value on the fake
model (:mod:`.script_reads`), an error the script raised (a dataset it cannot download, say), a script that ends
or exits before it steps an optimizer, a model not built by ``from_pretrained``/``from_config``. docs/plan.md says
which scripts work.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
import runpy
import sys
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException, FakeTensorMode

from neuroncompat.plan import report
from neuroncompat.plan import trace as traced
from neuroncompat.plan.hardware import CORES
from neuroncompat.plan.largest import local
from neuroncompat.plan.parallel import Layout
from neuroncompat.plan.script_model import fake_models
from neuroncompat.plan.script_reads import MACHINERY, ScriptStop, stopped_at
from neuroncompat.plan.script_step import StepWatch
from neuroncompat.plan.settings import PlanInputError, PlanSettings

_PYTHON = re.compile(r"python(\d+(\.\d+)?)?(\.exe)?$")


@dataclass(frozen=True)
class Command:
    """``python SCRIPT ARGS...`` or ``python -m MODULE ARGS...``, and the script file either runs."""

    argv: tuple[str, ...]
    script: Path
    module: str | None
    args: tuple[str, ...]


def parse(argv: Sequence[str]) -> Command:
    """The command after ``--``; one Python process only (a launcher's ranks are planned with --tp/--fsdp)."""
    given = " ".join(argv)
    if len(argv) < 2 or not _PYTHON.search(Path(argv[0]).name):
        raise PlanInputError(
            f"`{given}`: plan runs one Python process: expected `python SCRIPT ARGS...` or `python -m MODULE "
            "ARGS...` (for a torchrun or accelerate job, plan its model with --tp and --fsdp)"
        )
    if argv[1] == "-m":
        spec = importlib.util.find_spec(argv[2]) if len(argv) > 2 else None
        if spec is None or spec.origin is None:
            raise PlanInputError(f"`{given}`: no module {argv[2] if len(argv) > 2 else ''!r} to run")
        return Command(tuple(argv), Path(spec.origin).resolve(), argv[2], tuple(argv[3:]))
    script = Path(argv[1])
    if not script.is_file():
        raise PlanInputError(f"{script}: no such script")
    return Command(tuple(argv), script.resolve(), None, tuple(argv[2:]))


@dataclass(frozen=True)
class ScriptSettings:
    """What the script's step turned out to be, under the names :class:`PlanSettings` gives a planned one."""

    batch_size: int
    seq_len: int
    dtype: str
    autocast: str | None
    optimizer: str
    gradient_checkpointing: bool
    task: str = "train"
    max_new_tokens: int = PlanSettings.max_new_tokens
    lora_r: int | None = None
    lora_targets: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in PlanSettings.__dataclass_fields__}


@contextlib.contextmanager
def _as_main(command: Command) -> Iterator[None]:
    """``sys.argv`` and ``sys.path[0]`` as ``python SCRIPT ARGS`` sets them, restored afterwards."""
    argv, path = sys.argv[:], sys.path[:]
    sys.argv = [str(command.script), *command.args]
    sys.path.insert(0, str(command.script.parent) if command.module is None else "")
    try:
        yield
    finally:
        sys.argv, sys.path[:] = argv, path


@contextlib.contextmanager
def _foreach_by_default() -> Iterator[None]:
    """An optimizer the script builds without ``foreach`` gets torch's default for a Neuron tensor, foreach, as
    ``plan MODEL`` plans it (neuroncompat/plan/step.py), not the default for the CPU the fake tensors claim."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.optim import optimizer

    devices = optimizer._get_foreach_kernels_supported_devices
    optimizer._get_foreach_kernels_supported_devices = lambda: [*devices(), "cpu"]
    optimizer._foreach_supported_types.append(FakeTensor)
    try:
        yield
    finally:
        optimizer._get_foreach_kernels_supported_devices = devices
        optimizer._foreach_supported_types.remove(FakeTensor)


def _innermost(exc: BaseException) -> Any:
    """The innermost frame of ``exc``'s traceback outside torch and the plan (where the script's code was)."""
    tb, frame = exc.__traceback__, None
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(MACHINERY) or frame is None:
            frame = tb.tb_frame
        tb = tb.tb_next
    return frame


def _run(command: Command, watch: StepWatch) -> None:
    """The script, until the plan stops it; a reason it cannot be planned as a :class:`PlanInputError`."""
    try:
        if command.module is not None:
            runpy.run_module(command.module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(str(command.script), run_name="__main__")
    except ScriptStop as stop:
        if stop.reason is not None:
            raise PlanInputError(stop.reason) from None
        return
    except SystemExit as exit_:
        if not watch.done:
            raise PlanInputError(
                f"{command.script.name}: the script exited (status {exit_.code}) before its first optimizer step"
            ) from None
    except PlanInputError as exc:  # from_pretrained of a model with no config to read
        raise PlanInputError(stopped_at(command.script, _innermost(exc), str(exc))) from None
    except Exception as exc:  # the script's own error, or a value read outside the step
        if isinstance(exc, DataDependentOutputException | DynamicOutputShapeException):
            why = "reads a value of the fake model's tensors (its weights, or what they computed), which the plan does not have"
        else:
            why = f"the script raised {type(exc).__name__}: {exc}"
        raise PlanInputError(
            stopped_at(command.script, _innermost(exc), why + ", before its first training step")
        ) from None
    if not watch.done:
        raise PlanInputError(
            f"{command.script.name}: the script ended without a training step of a model built by from_pretrained "
            "or from_config (a forward with gradients on, backward, then optimizer.step())"
        )


def _lora(model: Any) -> dict[str, Any]:
    """The rank and target modules of the LoRA adapters peft added to the script's model (none: full fine-tuning),
    under the settings' names."""
    configs = getattr(model, "peft_config", None)
    lora = next((c for c in configs.values() if hasattr(c, "r")), None) if isinstance(configs, dict) else None
    if lora is None:
        return {}
    targets = lora.target_modules
    return {"lora_r": int(lora.r), "lora_targets": [targets] if isinstance(targets, str) else sorted(targets or ())}


def plan_script(argv: Sequence[str], instance: str = "trn2") -> dict:
    """The plan document (neuroncompat/plan/report.py) of the script's first training step (or generation) on one
    core."""
    command = parse(argv)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    watch = StepWatch(mode, command.script)
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(sys.stderr),
        _foreach_by_default(),
        fake_models(mode) as built,
        traced._one_sequence_per_row(),
        _as_main(command),
        watch.watching(),
    ):
        _run(command, watch)
    model, observed = watch.model, watch.observed
    assert model is not None and watch.tracker is not None  # watch.done
    total, split = traced._peak(watch.tracker)
    params = sorted(
        ((name, local(p).numel() * p.element_size()) for name, p in model.named_parameters()),
        key=lambda item: item[1],
        reverse=True,
    )
    trace = traced.Trace(
        peak_bytes=total,
        categories=split,
        phase=next(phase for phase, peak in watch.phase_peaks.items() if peak == total),
        phase_peaks=watch.phase_peaks,
        largest=watch.largest.top(),
        parameters=params[:3],
        parameter_count=sum(p.numel() for p in model.parameters()),
        kv_cache_bytes=traced._cache_bytes(watch.cache),
    )
    batch = observed["batch"] or (1, 1)
    settings = ScriptSettings(
        batch_size=int(batch[0]),
        seq_len=int(batch[1]) if len(batch) > 1 else 1,
        dtype=observed["dtype"],
        autocast=observed.get("autocast"),
        optimizer=observed.get("optimizer", PlanSettings.optimizer),  # a generation steps none: plan MODEL's default
        gradient_checkpointing=observed["gradient_checkpointing"],
        task=watch.task,
        max_new_tokens=observed.get("max_new_tokens", PlanSettings.max_new_tokens),
        **_lora(model),
    )
    config = getattr(model, "config", None)
    document = report.build(
        " ".join(argv),
        built.configs[0] if built.configs else Path("(a config the script built)"),
        config,
        settings,
        trace,
        CORES[instance],
        Layout(),
    )
    document["script"] = {
        "command": list(argv),
        "models": built.names,
        "stopped_at": watch.stopped_at_line,
        "answered_reads": [{"site": read.site, "why": read.why} for read in watch.reads.answered],
    }
    return document
