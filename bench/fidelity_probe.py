"""Probe each documented TorchNeuron behaviour on the ``neuron`` device and print the verdict.

One command a user can run on a laptop (the simulated device) and on a trn2 (real TorchNeuron), then diff:

    python bench/fidelity_probe.py                  # the simulated device (NEURONCOMPAT_SIMULATE=1)
    python bench/fidelity_probe.py --device neuron  # real torch-neuronx on Trainium: the real result
    python bench/fidelity_probe.py --json > sim.json

Each probe is a few tensor ops. Its row gives the behaviour as TorchNeuron documents it (with the source;
docs/simulator.md names them), what this device did, and a verdict:

- ``matches``: the documented behaviour was observed;
- ``DIFFERS``: it was not (on the simulator: a fidelity bug; on hardware: the docs or the probe are wrong);
- ``unknown``: TorchNeuron documents nothing checkable here. The observation is printed so that a trn2 run
  settles it: send the two JSON outputs (``--json``) with an issue.

Probes that need the environment at start-up (``NEURON_RT_VISIBLE_CORES``) run in a child process. None
imports the neuroncompat shim: this measures the device, not the patches. The simulated host has 4 cores
(one Trn2 chip under LNC=2; ``NEURONCOMPAT_SIMULATE_CORES``). Runs in about a minute on 2 cores (the
child processes import torch).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

DOCS = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/"
MOD = DOCS + "torch/reference/api/torch-neuron-module.html"
MEM = DOCS + "torch/guides/memory-profiling-guide.html"
TC = DOCS + "torch/compile/reference-torch-compile.html"
OPS = DOCS + "torch/reference/api/supported-operators.html"
ENV = DOCS + "torch/reference/env-vars.html"
RNG = DOCS + "torch/reference/random-number-generation.html"
NRT = DOCS + "neuron-runtime/guides/nrt-developer-guide.html"
NCC_INT64 = DOCS + "compiler/neuronx-cc/api-reference-guide/index.html"
NCC_FP32 = DOCS + "general/appnotes/neuronx-cc/neuronx-cc-training-mixed-precision.html"
CORE_V3 = DOCS + "about-neuron/arch/neuron-hardware/neuron-core-v3.html"
UNDOCUMENTED = "not documented"
SIMULATED_HOST_CORES = "4"
VISIBLE = "NEURON_RT_VISIBLE_CORES"

# (observation, whether it is the documented behaviour; None where nothing is documented)
Outcome = tuple[str, bool | None]


@dataclass(frozen=True)
class Probe:
    id: str
    documented: str
    source: str
    run: Callable[[], Outcome]


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"


def _child(code: str, env: dict[str, str]) -> tuple[int, str]:
    """Run ``code`` in a fresh interpreter with ``env`` added; (exit status, last line of its output)."""
    full = {**os.environ, **env}
    done = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=300)
    lines = (done.stdout.strip() or done.stderr.strip()).splitlines()
    named = [line[line.index(VISIBLE) :] for line in lines if VISIBLE in line]  # the refusal, when there is one
    return done.returncode, (named or lines or [""])[-1][:200]


# -- probes ----------------------------------------------------------------------------------------------
def registration() -> Outcome:
    import torch

    accelerator = torch.accelerator.current_accelerator()
    seen = f"torch.neuron={hasattr(torch, 'neuron')}, torch.accelerator={accelerator}"
    return seen, hasattr(torch, "neuron") and accelerator is not None and accelerator.type == "neuron"


def storages() -> Outcome:
    import torch

    storage = torch.ones(2, device="neuron").untyped_storage()
    try:
        return f"UntypedStorage.is_neuron={storage.is_neuron}", bool(storage.is_neuron)
    except AttributeError as exc:
        return _error(exc), False


def torch_neuronx_names() -> Outcome:
    import torch_neuronx  # type: ignore[import-not-found]

    names = ("memory_allocated", "memory_stats", "memory_summary", "neuron_dynamo_backend", "get_dynamo_metrics")
    missing = [name for name in names if not hasattr(torch_neuronx, name)]
    return (f"missing: {', '.join(missing)}" if missing else "all present"), not missing


def memory_statistics() -> Outcome:
    import torch

    x = torch.ones(1024, 1024, device="neuron")
    torch.neuron.synchronize()  # type: ignore[attr-defined]
    allocated = torch.accelerator.memory_allocated()
    reserved = torch.accelerator.memory_reserved()
    summary = hasattr(torch.neuron, "memory_summary") and bool(torch.neuron.memory_summary())  # type: ignore[attr-defined]
    del x
    seen = f"allocated={allocated} reserved={reserved} memory_summary={summary}"
    return seen, allocated >= 4 << 20 and reserved >= allocated and summary


def no_mem_get_info() -> Outcome:
    import torch

    present = hasattr(torch.neuron, "mem_get_info")
    return f"torch.neuron.mem_get_info present={present}", None


def index_less_device() -> Outcome:
    import torch

    device = torch.ones(1, device="neuron").device
    return f"torch.ones(device='neuron').device={device}", device == torch.device(
        "neuron", torch.neuron.current_device()
    )  # type: ignore[attr-defined]


def _cores_child(value: str, simulated: bool) -> tuple[int, str]:
    env = {"NEURON_RT_VISIBLE_CORES": value}
    if simulated:
        env |= {"NEURONCOMPAT_SIMULATE": "1", "NEURONCOMPAT_SIMULATE_CORES": SIMULATED_HOST_CORES}
    code = "import torch\nx = torch.ones(1, device='neuron:0')\nprint(torch.neuron.device_count(), x.device)"
    return _child(code, env)


def visible_cores(value: str, count: int, simulated: bool) -> Callable[[], Outcome]:
    def probe() -> Outcome:
        status, line = _cores_child(value, simulated)
        return f"exit {status}: {line}", status == 0 and line == f"{count} neuron:0"

    return probe


def invalid_visible_cores(value: str, simulated: bool) -> Callable[[], Outcome]:
    def probe() -> Outcome:
        status, line = _cores_child(value, simulated)
        return f"exit {status}: {line}", status != 0

    return probe


@contextlib.contextmanager
def _warnings_seen() -> Iterator[list[str]]:
    """The warnings raised and the WARNING log records emitted inside the block."""
    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Collect(logging.WARNING)
    logging.getLogger().addHandler(handler)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield seen
        finally:
            logging.getLogger().removeHandler(handler)
            seen.extend(str(w.message) for w in caught)


def compile_mode() -> Outcome:
    import torch

    torch._dynamo.reset()
    with _warnings_seen() as seen:
        try:
            torch.compile(lambda x: x + 1, backend="neuron", mode="reduce-overhead")(torch.ones(2, device="neuron"))
        except Exception as exc:  # noqa: BLE001  # the probe reports whatever happens
            return _error(exc), False
    named = [message for message in seen if "mode" in message]
    return f"ran; {len(named)} warning(s) naming the mode", bool(named)


def compile_options() -> Outcome:
    import torch

    torch._dynamo.reset()
    try:
        fn = torch.compile(lambda x: x * 2, backend="neuron", options={"fallback_execution": False})
        fn(torch.ones(2, device="neuron"))
    except Exception as exc:  # noqa: BLE001
        return _error(exc), False
    return "accepted", True


def compile_dynamic() -> Outcome:
    import torch

    torch._dynamo.reset()
    try:
        torch.compile(lambda x: x.sum(), backend="neuron", dynamic=True)(torch.ones(3, 4, device="neuron"))
    except Exception as exc:  # noqa: BLE001
        return f"raised {_error(exc)}", True
    return "ran", False


def compile_fullgraph() -> Outcome:
    import torch

    def broken(x: Any) -> Any:
        y = x * 2
        print(end="")  # a graph break
        return y + 1

    torch._dynamo.reset()
    try:
        torch.compile(broken, backend="neuron", fullgraph=True)(torch.ones(2, device="neuron"))
    except Exception as exc:  # noqa: BLE001
        return f"raised {type(exc).__name__}", True
    return "ran", False


def compile_auto_backend() -> Outcome:
    import torch
    import torch_neuronx

    torch._dynamo.reset()
    before = torch_neuronx.get_dynamo_metrics()
    torch.compile(lambda x: x - 1)(torch.ones(2, device="neuron"))
    after = torch_neuronx.get_dynamo_metrics()
    if isinstance(before, dict) and isinstance(after, dict) and "graphs_compiled" in after:  # the simulator's format
        recorded = after["graphs_compiled"] - before["graphs_compiled"]
        return f"graphs compiled by the neuron backend: {recorded}", recorded == 1
    return f"ran; get_dynamo_metrics() before: {repr(before)[:60]} after: {repr(after)[:60]}", None


def quantized_refused() -> Outcome:
    import torch

    try:
        q = torch.quantize_per_tensor(torch.ones(4, device="neuron"), 0.1, 0, torch.qint8)
    except Exception as exc:  # noqa: BLE001
        return f"refused: {_error(exc)}", True
    return f"ran: {q.dtype} on {q.device}", False


def cpu_fallback_op() -> Outcome:
    import torch

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        u, s, v = torch.linalg.svd(torch.eye(3, device="neuron") * 2)
    return f"svd ran on {s.device}; {len(caught)} warning(s)", None


def complex_eager() -> Outcome:
    import torch

    try:
        z = torch.ones(4, dtype=torch.complex64, device="neuron")
        w = z * (1 + 1j)
        return f"ran: {w.dtype}, first {w[0].item()}", None
    except Exception as exc:  # noqa: BLE001
        return f"raised {_error(exc)}", None


def float64_matmul() -> Outcome:
    import torch

    try:
        a = torch.full((2, 2), 1.0 + 2**-40, dtype=torch.float64, device="neuron")
        out = (a @ a).cpu()
        exact = torch.full((2, 2), 1.0 + 2**-40, dtype=torch.float64)
        return f"ran: {out.dtype}, equals the CPU's float64: {torch.equal(out, exact @ exact)}", None
    except Exception as exc:  # noqa: BLE001
        return f"raised {_error(exc)}", None


def int64_wide_values() -> Outcome:
    import torch

    big = 2**40 + 1
    eager = (torch.tensor([big], device="neuron") * 3).item()
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: x * 3, backend="neuron")(torch.tensor([big], device="neuron")).item()
    return f"eager exact: {eager == big * 3}, compiled exact: {compiled == big * 3}", None


def fp32_matmul_precision() -> Outcome:
    import torch

    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 64, generator=gen), torch.randn(64, 64, generator=gen)
    on_device = (a.to("neuron") @ b.to("neuron")).cpu()
    return f"max |device - cpu| = {(on_device - a @ b).abs().max().item():.2e}", None


def autocast_defaults() -> Outcome:
    import torch

    x = torch.ones(2, 4, device="neuron")
    layer = torch.nn.Linear(4, 4).to("neuron")
    with torch.autocast(device_type="neuron"):
        linear, softmax = layer(x).dtype, torch.softmax(x, -1).dtype
    return f"default autocast dtype: linear -> {linear}, softmax -> {softmax}", None


def rng_state() -> Outcome:
    import torch

    torch.manual_seed(7)
    state = torch.neuron.get_rng_state()  # type: ignore[attr-defined]
    first = torch.rand(3, device="neuron").cpu()
    torch.neuron.set_rng_state(state)  # type: ignore[attr-defined]
    again = torch.rand(3, device="neuron").cpu()
    seen = f"state {state.numel()} bytes {state.dtype}; restored draw equal: {torch.equal(first, again)}"
    return seen, state.numel() == 16 and state.dtype == torch.uint8 and torch.equal(first, again)


def masked_assignment_compiled() -> Outcome:
    import torch

    def clamp(x: Any, mask: Any) -> Any:
        x = x.clone()
        x[mask] = 0.0
        return x

    x = torch.arange(8.0, device="neuron")
    mask = x > 3
    torch._dynamo.reset()
    compiled = torch.compile(clamp, backend="neuron")(x, mask)
    return f"compiled x[mask] = 0 equals eager: {torch.equal(compiled.cpu(), clamp(x, mask).cpu())}", None


def mixed_devices() -> Outcome:
    import torch

    try:
        torch.ones(2, device="neuron") + torch.ones(2)
    except RuntimeError as exc:
        return f"raised: {_error(exc)}", None
    return "ran", None


def probes(simulated: bool) -> list[Probe]:
    return [
        Probe(
            "registration",
            "`neuron` is PrivateUse1; torch.neuron and torch.accelerator resolve to it",
            MOD,
            registration,
        ),
        Probe("storages", "tensors, modules and storages get .neuron() and .is_neuron", MOD, storages),
        Probe(
            "torch_neuronx_names",
            "torch_neuronx.memory_*, neuron_dynamo_backend, get_dynamo_metrics",
            f"{MEM} {TC}",
            torch_neuronx_names,
        ),
        Probe(
            "memory_statistics",
            "caching allocator with statistics, memory_summary; reserves large segments",
            MEM,
            memory_statistics,
        ),
        Probe(
            "no_mem_get_info",
            f"torch.neuron.mem_get_info: {UNDOCUMENTED} (transformers #47029 says absent)",
            "",
            no_mem_get_info,
        ),
        Probe(
            "index_less_device",
            "an index-less 'neuron' is the current core (the distributed guide's examples)",
            DOCS + "torch/guides/torch-distributed.html",
            index_less_device,
        ),
        Probe(
            "visible_cores_single",
            "NEURON_RT_VISIBLE_CORES=0: one core, neuron:0",
            NRT,
            visible_cores("0", 1, simulated),
        ),
        Probe(
            "visible_cores_renumbered",
            "NEURON_RT_VISIBLE_CORES=2,3: two cores renumbered from 0",
            NRT,
            visible_cores("2,3", 2, simulated),
        ),
        Probe(
            "visible_cores_not_contiguous",
            "NEURON_RT_VISIBLE_CORES=0-1,4-5 is invalid (must be contiguous)",
            NRT,
            invalid_visible_cores("0-1,4-5", simulated),
        ),
        Probe("compile_mode", "mode other than default: a warning, then the default", TC, compile_mode),
        Probe("compile_options", "options: a dict (fallback_execution is read)", f"{TC} {ENV}", compile_options),
        Probe("compile_dynamic", "dynamic=True is rejected during compilation", TC, compile_dynamic),
        Probe("compile_fullgraph", "fullgraph=True raises on a graph break", TC, compile_fullgraph),
        Probe(
            "compile_auto_backend", "no backend on a Neuron device: 'neuron' is auto-selected", TC, compile_auto_backend
        ),
        Probe("quantized", "quantized operator variants: class N (not supported)", OPS, quantized_refused),
        Probe(
            "cpu_fallback",
            f"which eager ops fall back to the CPU: in the operator table ({UNDOCUMENTED} readably)",
            OPS,
            cpu_fallback_op,
        ),
        Probe(
            "complex_eager", f"eager complex ops follow the fallback policy ({UNDOCUMENTED} per op)", ENV, complex_eager
        ),
        Probe(
            "float64", f"float64: no engine lists FP64 ({UNDOCUMENTED} what TorchNeuron does)", CORE_V3, float64_matmul
        ),
        Probe(
            "int64_wide",
            f"int64 past 2**31: neuronx-cc's default narrows to int32 ({UNDOCUMENTED} for TorchNeuron)",
            NCC_INT64,
            int64_wide_values,
        ),
        Probe(
            "fp32_matmul",
            f"fp32 matmul: neuronx-cc's default casts to bf16 ({UNDOCUMENTED} for TorchNeuron)",
            NCC_FP32,
            fp32_matmul_precision,
        ),
        Probe(
            "autocast_defaults",
            f"torch.autocast('neuron'): default dtype and op lists {UNDOCUMENTED}",
            DOCS + "torch/index.html",
            autocast_defaults,
        ),
        Probe("rng_state", "16-byte RNG state (seed, offset); restoring it repeats the draw", RNG, rng_state),
        Probe(
            "masked_assignment",
            f"x[mask] = v compiled: {UNDOCUMENTED} (aws-neuron-sdk#1381 is XLA-stack)",
            "https://github.com/aws-neuron/aws-neuron-sdk/issues/1381",
            masked_assignment_compiled,
        ),
        Probe("mixed_devices", f"an op mixing CPU and neuron tensors: {UNDOCUMENTED} (CUDA raises)", "", mixed_devices),
    ]


def verdict(ok: bool | None) -> str:
    return "unknown" if ok is None else "matches" if ok else "DIFFERS"


def run(simulated: bool) -> list[dict[str, str]]:
    rows = []
    for probe in probes(simulated):
        try:
            seen, ok = probe.run()
        except Exception as exc:  # noqa: BLE001  # a probe that crashes reports the crash
            seen, ok = f"probe crashed: {_error(exc)}", False
        rows.append(
            {
                "id": probe.id,
                "documented": probe.documented,
                "source": probe.source,
                "observed": seen,
                "verdict": verdict(ok),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--device",
        choices=("simulated", "neuron"),
        default="simulated",
        help="simulated (default) or real torch-neuronx",
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    simulated = args.device == "simulated"
    if simulated:
        os.environ["NEURONCOMPAT_SIMULATE"] = "1"  # before torch: its autoload enables the device, not the shim
        os.environ.setdefault("NEURONCOMPAT_SIMULATE_CORES", SIMULATED_HOST_CORES)
    import torch

    if not hasattr(torch, "neuron") or not torch.neuron.is_available():  # type: ignore[attr-defined]
        sys.exit(f"no neuron device ({'the simulator did not start' if simulated else 'is torch-neuronx installed?'})")
    rows = run(simulated)
    if args.json:
        print(json.dumps({"device": args.device, "torch": torch.__version__, "rows": rows}, indent=2))
        return
    print(f"device: {args.device}  torch {torch.__version__}")
    width = max(len(r["id"]) for r in rows)
    for row in rows:
        print(f"{row['verdict']:<8} {row['id']:<{width}}  {row['observed']}")
        print(
            f"{'':<8} {'':<{width}}  documented: {row['documented']}" + (f" ({row['source']})" if row["source"] else "")
        )
    counts = {v: sum(r["verdict"] == v for r in rows) for v in ("matches", "DIFFERS", "unknown")}
    print(f"{counts['matches']} match, {counts['DIFFERS']} differ, {counts['unknown']} unknown")


if __name__ == "__main__":
    main()
