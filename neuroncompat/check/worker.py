"""The stages of ``neuroncompat check``, run in a fresh process on the simulated device with the shim.

``python -m neuroncompat.check.worker [--tensor-parallel] CONFIG_JSON OUT_JSON [CONFIG_JSON OUT_JSON ...]`` (the ``check`` command
starts it with ``NEURONCOMPAT_SIMULATE=1``; several pairs check several models in turn in one process, which
saves each later model the process's start: imports and Dynamo's first compile). Each stage runs the tiny model
as a user's script would on a trn2 and the same weights on the CPU, and compares:

1. ``load``: ``from_pretrained(dir, device_map="neuron", dtype=<config dtype>)``; every parameter must be
   on the device;
2. ``generate``: greedy ``generate`` with ``cache_implementation="static"`` (the cache the shim and
   TorchNeuron's guide ask for), 6 new tokens from a fixed 8-token prompt; the tokens must equal the CPU's;
3. ``train-eager`` and ``train-compiled`` (``torch.compile(model, backend="neuron")``): one forward and
   backward on a fixed batch; loss and gradient norm within ``rtol`` of the CPU's eager ones. A model that draws
   random numbers in training (Phi-MoE's sparsemixer samples its experts) would draw different ones on the
   device: its generator is not the CPU's, on a trn2 as in the simulator (docs/simulator.md, RNG values). So
   both steps start from the same seed and the CPU reference makes its draws on the device
   (:class:`_DrawsOnDevice`): the two steps then see the same random numbers, and any difference is the device's.
4. ``tensor-parallel`` (with ``--tensor-parallel``; skipped where the config has no ``base_model_tp_plan``): the
   same weights split over 2 ranks with ``DistributedConfig(tp_size=2)`` under ``torchrun``
   (:mod:`neuroncompat.check.tp_rank`), one core each; every rank's greedy tokens (default cache) must equal the
   CPU's, and its training step's loss and gradient norm must be within ``rtol`` of the CPU's. The ranks are
   other processes: the stage's graphs and findings are not recorded.

What a stage compiled, and the findings the dry run's recorder saw while it ran (graph breaks with
Dynamo's reason, data-dependent-shape ops, CPU-fallback ops, complex/fp64 tensors on the device), are
the recorder's record taken before and after the stage. The shim patches that acted are those that logged
on ``neuroncompat`` during the stage. A failing stage gives its first error with the innermost frame of
the model's own code (``transformers/models/...``) and the innermost frame overall.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

import neuroncompat  # noqa: F401  (the shim, as a user's script starts it)
from neuroncompat import shim
from neuroncompat.check.recompiles import recompiles
from neuroncompat.check.tiny import VOCAB, tiny_config
from neuroncompat.simulate import record

STAGES = ("load", "generate", "train-eager", "train-compiled", "tensor-parallel")
TP_TIMEOUT_S = 300
PROMPT_TOKENS = 8
NEW_TOKENS = 6
# fp32 on the simulator runs the CPU's kernels: equal up to reduction order in compiled graphs
RTOL = {torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 1e-2}
_FINDING_KINDS = ("graph_break", "data_dependent", "cpu_fallback", "complex_on_device", "fp64_on_device")


class CpuReferenceError(Exception):
    """The same model failed on the CPU too: the stage says nothing about Neuron (the model's or the tiny config's
    own problem)."""


class _Skipped(Exception):
    """The stage does not apply to this model (no tensor-parallel plan): its message says why."""


class _RankError(Exception):
    """A tensor-parallel rank failed: its error and where, read from the ranks' output."""

    def __init__(self, message: str, where: dict[str, str | None]) -> None:
        super().__init__(message)
        self.where = where


def _rank_error(returncode: int, output: str) -> _RankError:
    """The ranks' first real error in torchrun's output (a traceback's last line), with its model and innermost
    frames; torchrun's own ``ChildFailedError`` summary is not the cause."""
    lines = output.splitlines()
    first = next(
        (
            n
            for n, line in enumerate(lines)
            if re.match(r"^\s*(\[rank\d+\]:\s*)?[\w.]*(Error|Exception)\b.*:", line) and "ChildFailedError" not in line
        ),
        None,
    )
    errors = [lines[first].strip()] if first is not None else []
    # the frames of that traceback: torchrun's own traceback (ChildFailedError) comes after it
    frames = re.findall(r'File "([^"]+)", line (\d+)', "\n".join(lines[:first]))

    def short(frame: tuple[str, str] | None) -> str | None:
        if frame is None:
            return None
        parts = Path(frame[0]).parts
        tail = parts[parts.index("site-packages") + 1 :] if "site-packages" in parts else parts[-2:]
        return f"{'/'.join(tail)}:{frame[1]}"

    model = next((f for f in reversed(frames) if "/transformers/models/" in f[0]), None)
    message = re.sub(r"^\[rank\d+\]:\s*", "", errors[0]) if errors else f"the 2 ranks exited with {returncode}"
    return _RankError(message, {"model_line": short(model), "innermost": short(frames[-1] if frames else None)})


def _on_cpu(compute: Callable[[], Any]) -> Any:
    try:
        return compute()
    except Exception as exc:
        raise CpuReferenceError(f"{type(exc).__name__}: {exc}") from exc


class _PatchLog(logging.Handler):
    """The ids of the shim patches that logged while a stage ran (each patch logs ``[id] ...`` once)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.ids: list[str] = []

    def emit(self, entry: logging.LogRecord) -> None:
        message = entry.getMessage()
        if message.startswith("[") and "]" in message:
            patch = message[1 : message.index("]")]
            if patch not in self.ids:
                self.ids.append(patch)


def _where(exc: BaseException) -> dict[str, str | None]:
    frames = traceback.extract_tb(exc.__traceback__)
    model = next((f for f in reversed(frames) if "/transformers/models/" in f.filename), None)
    last = frames[-1] if frames else None

    def short(frame: traceback.FrameSummary | None) -> str | None:
        if frame is None:
            return None
        parts = Path(frame.filename).parts
        tail = parts[parts.index("site-packages") + 1 :] if "site-packages" in parts else parts[-2:]
        return f"{'/'.join(tail)}:{frame.lineno}"

    return {"model_line": short(model), "innermost": short(last)}


def _message(exc: BaseException) -> str:
    """The first line of ``exc``'s message, and the error Dynamo wrapped where it wrapped one: a compiled step's
    "RuntimeError when making fake tensor call" says nothing until it names the op's own error."""
    text = str(exc)
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")  # transformers' start with "\n"
    inner = re.search(r"\): got (\w+)\((['\"])(.*?)\2\)", text, re.DOTALL)
    return f"{first} ({inner.group(1)}: {inner.group(3)})" if inner else first


def _delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    graphs = after["compiled"][len(before["compiled"]) :]
    counts = {(f["kind"], f["what"], f["site"]): f["count"] for f in before["findings"] if f["kind"] in _FINDING_KINDS}
    findings = []
    for f in after["findings"]:
        key = (f["kind"], f["what"], f["site"])
        if f["kind"] in _FINDING_KINDS and f["count"] > counts.get(key, 0):
            findings.append(
                {"kind": f["kind"], "what": f["what"], "site": f["site"], "count": f["count"] - counts.get(key, 0)}
            )
    return {
        "graphs": len(graphs),
        "graph_triggers": sorted({g["trigger"] for g in graphs if g.get("trigger")}),
        "findings": findings,
    }


# The ops whose values are random draws. aten's tag `nondeterministic_seeded` also marks ops that draw only for
# dropout (the CPU's fused attention): those keep the CPU's values.
_DRAWS = frozenset(
    getattr(torch.ops.aten, name)
    for name in (
        "bernoulli", "bernoulli_", "cauchy_", "exponential_", "geometric_", "log_normal_", "multinomial",
        "native_dropout", "normal", "normal_", "poisson", "rand", "rand_like", "randint", "randint_like", "randn",
        "randn_like", "random_", "randperm", "uniform_",
    )
)  # fmt: skip
_SEED = 0


def _to_device(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to("neuron")
    return torch.device("neuron") if isinstance(x, torch.device) else x


class _DrawsOnDevice(TorchDispatchMode):
    """Run the CPU reference's random draws on the device, with the device's generator.

    The device step, seeded alike, then draws the same numbers in the same order. Every other op tagged
    ``nondeterministic_seeded`` (fused attention, whose dropout draws) keeps the CPU's value but also runs on
    the device, its result dropped: the device's generator moves on for such an op, dropout or not (the
    simulator's contract: an op advances the offset by its value count, docs/simulator.md), and so it must here
    as in the device step. A draw with an explicit generator (the fixed batch) is left alone. ``draws`` counts
    the draws moved, for the report: with none, the CPU reference is the CPU's alone.
    """

    def __init__(self) -> None:
        super().__init__()
        self.draws = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        seeded = torch.Tag.nondeterministic_seeded in func.tags
        if not seeded or kwargs.get("generator") is not None:
            return func(*args, **kwargs)
        if func.overloadpacket not in _DRAWS:
            # the device's generator moves on; should the op fail there, the device step says so, not the reference
            with contextlib.suppress(Exception):
                func(*tree_map(_to_device, args), **tree_map(_to_device, kwargs))
            return func(*args, **kwargs)
        self.draws += 1
        device_args, device_kwargs = tree_map(_to_device, args), tree_map(_to_device, kwargs)
        out = func(*device_args, **device_kwargs)
        if func._schema.is_mutable and isinstance(args[0], torch.Tensor):  # in place: fill the CPU tensor
            return args[0].copy_(device_args[0])
        return tree_map(lambda x: x.cpu() if isinstance(x, torch.Tensor) else x, out)


def _close(device: float, cpu: float, dtype: torch.dtype) -> bool:
    return abs(device - cpu) <= RTOL.get(dtype, 1e-4) * max(abs(cpu), 1e-6)


def _batch() -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    return torch.randint(3, VOCAB, (2, 16), generator=generator)


def _step(model: torch.nn.Module, forward: Callable[..., Any], device: str) -> tuple[float, float]:
    """One forward and backward: the loss and the global gradient norm."""
    model.train()
    model.zero_grad(set_to_none=True)
    ids = _batch().to(device)
    loss = forward(input_ids=ids, labels=ids).loss
    loss.backward()
    grads = [p.grad.detach().float().norm() for p in model.parameters() if p.grad is not None]
    return float(loss.detach().float().cpu()), float(torch.stack(grads).norm().cpu())


def _build(full: Any, dtype: torch.dtype) -> tuple[Any, Any]:
    """The tiny model of ``full``'s architecture and its config (:mod:`neuroncompat.check.tiny`).

    Layers of a kind that share weights need two of that kind (``repeats=2``), so that is tried when one of each
    does not build. Where the full config does not build a model either (on the meta device: no memory), the
    config or transformers is at fault, not Neuron: :class:`CpuReferenceError`.
    """
    from transformers import AutoModelForCausalLM

    first: Exception | None = None
    for repeats in (1, 2):
        try:
            config = tiny_config(full, repeats)
            torch.manual_seed(0)
            return AutoModelForCausalLM.from_config(config, dtype=dtype), config
        except Exception as exc:  # the tiny config, or the model from it, does not build
            first = first or exc
    try:
        with torch.device("meta"):
            AutoModelForCausalLM.from_config(full)
    except Exception as exc:
        raise CpuReferenceError(
            f"the model does not build from its config: {type(exc).__name__}: {_message(exc)}"
        ) from exc
    assert first is not None
    raise first


class UnreadableConfig(Exception):
    """transformers cannot read the config (no or an unknown ``model_type``, a wrong field): the user's input to fix,
    reported as such (``check`` exits 2) rather than as a traceback."""


def _read_config(config_path: Path) -> Any:
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(config_path)
    except Exception as exc:  # whatever transformers raises for a config it cannot read
        raise UnreadableConfig(
            f"transformers cannot read {config_path.name}: {type(exc).__name__}: {_message(exc)}"
        ) from exc


@dataclass
class _Subject:
    """What the stages share: the tiny model saved in ``directory``, and the CPU and device copies ``load`` makes.

    ``unbuilt`` is why no tiny model could be built (the load stage reports it); ``neuron`` stays None until the
    device copy loads, and the stages after ``load`` are skipped without it.
    """

    config: Any
    dtype: torch.dtype
    directory: str
    # reloaded through its class: a multimodal model's saved config may be its text config's (Emu3), which the
    # auto mapping does not take back
    model_class: Any
    parameters: int = 0
    unbuilt: CpuReferenceError | None = None
    cpu: Any = None
    neuron: Any = None


def _load(subject: _Subject) -> str:
    if subject.unbuilt is not None:
        raise subject.unbuilt
    subject.cpu = subject.model_class.from_pretrained(subject.directory, dtype=subject.dtype)
    subject.neuron = model = subject.model_class.from_pretrained(
        subject.directory, device_map="neuron", dtype=subject.dtype
    )
    off = sorted({str(p.device) for p in model.parameters() if p.device.type != "neuron"})
    if off:
        raise AssertionError(f"parameters left on {', '.join(off)}")
    return f"{subject.parameters:,} parameters on {next(model.parameters()).device}"


def _generate(subject: _Subject) -> str:
    prompt = _batch()[:1, :PROMPT_TOKENS]
    kwargs = dict(max_new_tokens=NEW_TOKENS, do_sample=False, cache_implementation="static")
    cpu = _on_cpu(lambda: subject.cpu.eval().generate(prompt, **kwargs))
    device = subject.neuron.eval().generate(prompt.to("neuron"), **kwargs).cpu()
    if not torch.equal(cpu, device):
        raise AssertionError(
            f"tokens differ from the CPU's: {device[0, PROMPT_TOKENS:].tolist()} vs {cpu[0, PROMPT_TOKENS:].tolist()}"
        )
    return f"{NEW_TOKENS} greedy tokens equal the CPU's"


def _cpu_step(subject: _Subject) -> tuple[tuple[float, float], int]:
    """The CPU reference's training step from the stages' seed, its random draws made on the device
    (:class:`_DrawsOnDevice`): its loss and gradient norm, and how many draws it moved."""
    draws = _DrawsOnDevice()

    def reference() -> tuple[float, float]:
        torch.manual_seed(_SEED)  # seeds the CPU and every core
        with draws:
            return _step(subject.cpu, subject.cpu, "cpu")

    return _on_cpu(reference), draws.draws


def _train(subject: _Subject, compiled: bool) -> str:
    cpu, draws = _cpu_step(subject)
    model = subject.neuron
    forward = torch.compile(model, backend="neuron") if compiled else model
    torch.manual_seed(_SEED)
    device = _step(model, forward, "neuron")
    if not (_close(device[0], cpu[0], subject.dtype) and _close(device[1], cpu[1], subject.dtype)):
        raise AssertionError(f"loss {device[0]:.6g}, grad norm {device[1]:.6g} vs the CPU's {cpu[0]:.6g}, {cpu[1]:.6g}")
    same = f"; {draws} random draws, the same on both" if draws else ""
    return f"loss {device[0]:.6g}, grad norm {device[1]:.6g} (CPU {cpu[0]:.6g}, {cpu[1]:.6g}){same}"


def _train_eager(subject: _Subject) -> str:
    return _train(subject, compiled=False)


def _train_compiled(subject: _Subject) -> str:
    return _train(subject, compiled=True)


def _run_ranks(directory: str) -> list[dict[str, Any]]:
    """What each of the 2 tensor-parallel ranks (:mod:`neuroncompat.check.tp_rank`) saw, run under torchrun."""
    with tempfile.TemporaryDirectory(prefix="neuroncompat-check-tp-") as scratch:
        prefix = str(Path(scratch) / "rank")
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            port = free.getsockname()[1]
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
        command += ["--master_port", str(port), "-m", "neuroncompat.check.tp_rank", directory, prefix]
        done = subprocess.run(command, capture_output=True, text=True, timeout=TP_TIMEOUT_S)
        if done.returncode != 0:
            raise _rank_error(done.returncode, done.stderr + done.stdout)
        return [json.loads(Path(f"{prefix}.{rank}.json").read_text()) for rank in (0, 1)]


def _tensor_parallel(subject: _Subject) -> str:
    if not getattr(subject.config, "base_model_tp_plan", None):
        raise _Skipped("no tensor-parallel plan in the config (base_model_tp_plan)")
    prompt = _batch()[:1, :PROMPT_TOKENS]
    tokens = _on_cpu(
        lambda: subject.cpu.eval().generate(prompt, max_new_tokens=NEW_TOKENS, do_sample=False)[0].tolist()
    )
    cpu, _ = _cpu_step(subject)
    ranks = _run_ranks(subject.directory)
    for r in ranks:
        if r["devices"] != [f"neuron:{r['rank']}"] or not r["sharded"]:
            raise AssertionError(f"rank {r['rank']}: {r['sharded']} parameters sharded, on {r['devices']}")
        if r["tokens"] != tokens:
            raise AssertionError(
                f"rank {r['rank']}'s tokens differ from the CPU's: {r['tokens'][PROMPT_TOKENS:]} vs "
                f"{tokens[PROMPT_TOKENS:]}"
            )
        if not (_close(r["loss"], cpu[0], subject.dtype) and _close(r["grad_norm"], cpu[1], subject.dtype)):
            raise AssertionError(
                f"rank {r['rank']}: loss {r['loss']:.6g}, grad norm {r['grad_norm']:.6g} vs the CPU's "
                f"{cpu[0]:.6g}, {cpu[1]:.6g}"
            )
    return (
        f"2 ranks, {ranks[0]['sharded']} of {ranks[0]['parameters']} parameters sharded; {NEW_TOKENS} greedy "
        f"tokens equal the CPU's; loss {ranks[0]['loss']:.6g}, grad norm {ranks[0]['grad_norm']:.6g} "
        f"(CPU {cpu[0]:.6g}, {cpu[1]:.6g})"
    )


_STAGE_FUNCTIONS: dict[str, Callable[[_Subject], str]] = {
    "load": _load,
    "generate": _generate,
    "train-eager": _train_eager,
    "train-compiled": _train_compiled,
    "tensor-parallel": _tensor_parallel,
}


def _run_stage(name: str, subject: _Subject, recorder: record.Recorder, patches: _PatchLog) -> dict[str, Any]:
    """One stage's entry: its status and detail or first error, its time, and what it compiled, found and patched.

    A stage's failure is its result: the next stage still runs."""
    patches.ids.clear()
    torch._dynamo.reset()
    before = recorder.snapshot()
    start = time.perf_counter()
    entry: dict[str, Any] = {"stage": name}
    try:
        entry.update(status="pass", detail=_STAGE_FUNCTIONS[name](subject))
    except _Skipped as exc:
        entry.update(status="skipped", detail=str(exc))
    except _RankError as exc:
        entry.update(status="fail", error=str(exc)[:500], **exc.where)
    except CpuReferenceError as exc:  # not a Neuron verdict: the CPU run of the same model fails
        cause = exc.__cause__ or exc
        entry.update(status="cpu-fails", error=f"the CPU fails too: {_message(exc)}"[:500], **_where(cause))
    except Exception as exc:
        entry.update(status="fail", error=f"{type(exc).__name__}: {_message(exc)}"[:500], **_where(exc))
    entry["seconds"] = round(time.perf_counter() - start, 2)
    entry.update(_delta(before, recorder.snapshot()))
    entry["recompiles"] = recompiles()  # this stage's: torch._dynamo.reset() above forgot the others
    entry["patches"] = list(patches.ids)
    return entry


def _header(config: Any, dtype: torch.dtype, built: bool) -> dict[str, Any]:
    """The report's description of the model checked, before its stages."""
    return {
        "architecture": (config.architectures or [type(config).__name__])[0],
        "model_type": config.model_type,
        "dtype": str(dtype).removeprefix("torch."),
        # a multimodal config: its language model's; none where no depth is named (BLT's byte-level sub-models)
        "layers": getattr(config.get_text_config(), "num_hidden_layers", None) if built else None,
        "parameters": 0,
        "stages": [],
    }


def run(
    config_path: Path, tensor_parallel: bool = False, announce: Callable[[str], None] = lambda step: None
) -> dict[str, Any]:
    """Check one model; ``announce`` is told each step as it starts (the progress line, ``check/progress.py``)."""
    announce("build")
    began = time.perf_counter()
    full = _read_config(config_path)
    dtype = full.dtype if isinstance(getattr(full, "dtype", None), torch.dtype) else torch.float32
    unbuilt = None
    try:
        built, config = _build(full, dtype)
    except CpuReferenceError as exc:  # the load stage reports it; the others are skipped
        built, config, unbuilt = None, full, exc
    recorder = record.start(tempfile.mkdtemp(prefix="neuroncompat-check-"))
    patches = _PatchLog()
    logging.getLogger("neuroncompat").addHandler(patches)
    logging.getLogger("neuroncompat").setLevel(logging.INFO)
    result = _header(config, dtype, built is not None)
    with tempfile.TemporaryDirectory(prefix="neuroncompat-check-model-") as directory:
        subject = _Subject(config, dtype, directory, type(built), unbuilt=unbuilt)
        if built is not None:
            built.save_pretrained(directory)
            result["parameters"] = subject.parameters = sum(p.numel() for p in built.parameters())
            del built
        for name in STAGES if tensor_parallel else STAGES[:-1]:
            announce(name)
            if name != "load" and subject.neuron is None:
                result["stages"].append({"stage": name, "status": "skipped", "detail": "the model did not load"})
                continue
            result["stages"].append(_run_stage(name, subject, recorder, patches))
    logging.getLogger("neuroncompat").removeHandler(patches)  # a later model in this process has its own
    result["seconds"] = round(time.perf_counter() - began, 2)  # this model's, without the process's start
    return result


def main() -> None:
    """Check each ``CONFIG_JSON OUT_JSON`` pair in turn; a model that cannot be checked writes its ``error``.

    ``--progress-fd N`` (first) names a pipe to write ``MODEL_INDEX STEP`` lines to as each step starts.
    """
    pairs = sys.argv[1:]
    progress = None
    if pairs[:1] == ["--progress-fd"]:
        progress = open(int(pairs[1]), "w", buffering=1)  # line-buffered: each step reaches the parent as it starts
        pairs = pairs[2:]
    tensor_parallel = bool(pairs) and pairs[0] == "--tensor-parallel"
    pairs = pairs[1:] if tensor_parallel else pairs
    for index, (config_path, out_path) in enumerate(zip(pairs[::2], pairs[1::2])):
        shim.log_changes_again()  # each model's report names the patches that acted for it

        def announce(step: str, index: int = index) -> None:
            if progress is not None:
                progress.write(f"{index} {step}\n")

        try:
            result = run(Path(config_path), tensor_parallel, announce)
        except UnreadableConfig as exc:
            result = {"input_error": str(exc)}
        except Exception:  # the config cannot be shrunk or built: this model's answer, the next one still runs
            result = {"error": "\n".join(traceback.format_exc().strip().splitlines()[-15:])}
        Path(out_path).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
