"""PyTorch's own OpInfo samples, run on the simulated device and on the CPU, compared exactly.

Every operator PyTorch describes in ``op_db`` (``torch.testing._internal.common_methods_invocations``)
comes with sample inputs. For each op and dtype, each sample runs once on the CPU and once with
its tensors moved to ``neuron:0``; the outputs must be equal (same values, NaNs in the same
places, same dtype and shape, on the device). Because the simulated device runs the CPU's own
kernels on its memory, any difference is a simulator bug: an op whose composite path takes a
branch for accelerators that only CUDA implements (the fused RNN cells, ``convolution_overrideable``
were two), a lost in-place write, a wrong view.

Random ops (``bernoulli``, ``dropout``...) draw from the device generator and are left out of the
value comparison: they are checked for shape and dtype only. Ops whose CPU run itself raises are
skipped; an op that fails only on the device is a failure, with its error.

``--quick`` runs a fixed subset (the ops a transformer's training step uses, plus the classes
that once failed) and is what the test suite runs (tests/test_simulator_opinfo.py).

Run: ``python bench/opinfo_sweep.py [--quick | --ops add,mm] [--dtypes float32,bfloat16] [--limit-samples 4] [--json]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

os.environ.pop("NEURONCOMPAT_SIMULATE", None)  # this script enables the device itself

import torch
from torch.utils._pytree import tree_flatten, tree_map

# The ops a transformer's training step and a diffusion UNet use, and every class that failed once.
QUICK = (
    "add",
    "mul",
    "div",
    "sub",
    "matmul",
    "mm",
    "bmm",
    "addmm",
    "baddbmm",
    "linalg.vector_norm",
    "nn.functional.linear",
    "nn.functional.embedding",
    "nn.functional.layer_norm",
    "nn.functional.rms_norm",
    "nn.functional.group_norm",
    "nn.functional.softmax",
    "log_softmax",
    "nn.functional.cross_entropy",
    "nn.functional.gelu",
    "nn.functional.silu",
    "nn.functional.scaled_dot_product_attention",
    "nn.functional.conv1d",
    "nn.functional.conv2d",
    "nn.functional.conv_transpose2d",
    "nn.functional.interpolate",
    "nn.functional.pad",
    "cumsum",
    "topk",
    "sort",
    "argmax",
    "where",
    "masked_fill",
    "index_select",
    "gather",
    "scatter_add",
    "index_put",
    "cat",
    "stack",
    "chunk",
    "transpose",
    "permute",
    "reshape",
    "view",
    "expand",
    "triu",
    "tril",
    "arange",
    "full",
    "sum",
    "mean",
    "var",
    "std",
    "amax",
    "rsqrt",
    "exp",
    "log",
    "pow",
    "clamp",
    "abs",
    "sigmoid",
    "tanh",
    "nonzero",
    "unique",
    "masked_select",
    "repeat_interleave",
    "einsum",
    "_foreach_add",
    "_foreach_mul",
    "_foreach_norm",
    "addcmul",
    "addcdiv",
    "lerp",
    "lt",
    "eq",
)
RANDOM = {
    "bernoulli",
    "normal",
    "rand_like",
    "randn_like",
    "randint_like",
    "multinomial",
    "nn.functional.dropout",
    "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout",
    "nn.functional.dropout2d",
    "nn.functional.dropout3d",
    "nn.functional.rrelu",
    "uniform",
    "exponential",
    "geometric",
    "log_normal",
    "cauchy",
    "randint",
    "randn",
    "rand",
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "empty_permuted",
    "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d",
    "nn.functional.multi_head_attention_forward",
}

# Differences that are the device's, not a simulator bug: each is what CUDA does too, or a sample that
# cannot be compared. Reported as "known" with the reason; the sweep fails only on the others.
KNOWN = {
    "sparse.sampled_addmm": "sparse CSR tensors: the device is strided-only, as TorchNeuron documents no sparse layout",
    "sparse.mm.reduce": "sparse CSR tensors: the device is strided-only",
    "to_sparse": "sparse layouts: the device is strided-only",
    "tensor_split": "an index tensor must be on the CPU (the op reads it on the host), as on CUDA",
    "to": "the sample passes the device positionally (cpu), so the output is on the CPU by request",
    "as_strided.partial_views": "the sample reads storage outside the view it made, which the copy to the device drops",
    "svd_lowrank": "draws a random projection: values differ by generator",
    "pca_lowrank": "draws a random projection: values differ by generator",
    "nn.functional.linear_cross_entropy.chunked": "its chunking and accumulation policy is chosen by device type",
    "nn.functional.linear_cross_entropy.chunked_none": "its chunking and accumulation policy is chosen by device type",
    "linalg.lstsq": "the default driver is chosen by device type (gelsy on the CPU only, gels elsewhere), as on CUDA",
    "linalg.lstsq.grad_oriented": "the default driver is chosen by device type, as on CUDA",
}


@dataclass(frozen=True)
class Result:
    """One op at one dtype: how many samples ran, and the first failure if any."""

    op: str
    dtype: str
    samples: int
    status: str  # "ok", "mismatch", "device_error", "known" (a KNOWN difference), "skipped"
    detail: str = ""


def _to_device(value: Any) -> Any:
    """Tensors moved to the device; a factory's ``device=`` keyword names it."""
    if isinstance(value, dict) and "device" in value:
        value = {**value, "device": "neuron:0"}
    return tree_map(lambda v: v.to("neuron:0") if isinstance(v, torch.Tensor) else v, value)


def _to_cpu(value: Any) -> Any:
    return tree_map(lambda v: v.to("cpu") if isinstance(v, torch.Tensor) else v, value)


def _equal(expected: Any, actual: Any, values: bool, on_device: bool = True) -> str:
    """'' when equal, else what differs (``on_device``: tensor outputs must be on the device)."""
    left, _ = tree_flatten(expected)
    right, _ = tree_flatten(actual)
    if len(left) != len(right):
        return f"{len(right)} outputs, expected {len(left)}"
    for i, (a, b) in enumerate(zip(left, right, strict=True)):
        if isinstance(a, torch.Tensor):
            if not isinstance(b, torch.Tensor):
                return f"output {i} is {type(b).__name__}, expected a tensor"
            if on_device and b.device.type != "neuron" and a.device.type == "cpu":
                return f"output {i} on {b.device}, expected the device"
            if a.shape != b.shape or a.dtype != b.dtype:
                return f"output {i}: {tuple(b.shape)} {b.dtype}, expected {tuple(a.shape)} {a.dtype}"
            if values and a.layout == torch.strided:
                b_cpu = b.cpu()
                if a.is_complex():  # compared as float pairs (nan_to_num has no complex32 kernel)
                    a, b_cpu = (
                        torch.view_as_real(t.resolve_conj().resolve_neg().to(torch.complex64)) for t in (a, b_cpu)
                    )
                floating = a.is_floating_point()
                if floating and not torch.equal(a.isnan(), b_cpu.isnan()):
                    return f"output {i}: NaNs differ"
                if not torch.equal(a.nan_to_num(0.0) if floating else a, b_cpu.nan_to_num(0.0) if floating else b_cpu):
                    return f"output {i} differs"
        elif a != b and not (isinstance(a, float) and a != a and b != b):
            return f"output {i} = {b!r}, expected {a!r}"
    return ""


def run_op(opinfo: Any, dtype: torch.dtype, limit: int) -> Result:
    """Run up to ``limit`` samples of ``opinfo`` at ``dtype`` on both devices."""
    name = opinfo.name + (f".{opinfo.variant_test_name}" if opinfo.variant_test_name else "")
    values = opinfo.name not in RANDOM
    ran = 0
    try:
        samples = list(opinfo.sample_inputs("cpu", dtype, requires_grad=False))[:limit]
    except Exception as exc:  # noqa: BLE001 (PyTorch's own sample generators; a failure there is not ours)
        return Result(name, str(dtype), 0, "skipped", f"samples: {type(exc).__name__}")
    for sample in samples:
        args = (sample.input, *sample.args)
        random = not values or float(sample.kwargs.get("dropout_p", 0.0) or 0.0) > 0  # draws differ by device
        # copied before the CPU run: ops that update an argument (batch norm's running stats) must
        # start from the same values on both devices
        device_args, device_kwargs = _to_device(args), _to_device(sample.kwargs)
        try:
            if random:  # torch.manual_seed queues a lazy seed (with a stack trace) per accelerator: not per op
                torch.manual_seed(0)
            expected = opinfo.op(*args, **sample.kwargs)
        except Exception:  # noqa: BLE001 (the CPU itself refuses this sample)
            continue
        try:
            if random:
                torch.manual_seed(0)
            actual = opinfo.op(*device_args, **device_kwargs)
        except Exception as exc:  # noqa: BLE001 (reported, not raised: the sweep lists every failure)
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            return Result(name, str(dtype), ran, "device_error", f"{type(exc).__name__}: {first}")
        ran += 1
        problem = _equal(expected, actual, not random)
        if not problem and not random:
            # in-place ops and out= write into their arguments: those must match too
            problem = _equal(args, _to_cpu(device_args), True, on_device=False)
        if problem:
            return Result(name, str(dtype), ran, "mismatch", problem)
    return Result(name, str(dtype), ran, "ok" if ran else "skipped", "" if ran else "no sample ran on the CPU")


def ops(names: Iterable[str] | None) -> Iterator[Any]:
    """The OpInfos to sweep: all of ``op_db``, or those named."""
    from torch.testing._internal.common_methods_invocations import op_db

    wanted = set(names) if names is not None else None
    for opinfo in op_db:
        if wanted is None or opinfo.name in wanted:
            yield opinfo


@contextlib.contextmanager
def _outside_unittest() -> Iterator[None]:
    """OpInfo's sample iterators look for the running ``unittest.TestCase`` with ``inspect.stack()``
    (``extract_test_fn``, for its tracked-input debugging), which reads the source of every frame on
    the stack; the sweep runs in no TestCase, so the search finds nothing, and under pytest, with a
    deep stack and a large ``sys.modules``, it cost 10x the sweep. Tell them there is none."""
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo import core

    saved = common_utils.extract_test_fn, core.extract_test_fn
    common_utils.extract_test_fn = core.extract_test_fn = lambda: None
    try:
        yield
    finally:
        common_utils.extract_test_fn, core.extract_test_fn = saved


def sweep(names: Iterable[str] | None, dtypes: list[torch.dtype], limit: int, verbose: bool = False) -> list[Result]:
    """Every (op, dtype) pair the OpInfo supports on the CPU, run on both devices."""
    with _outside_unittest():
        return _sweep(names, dtypes, limit, verbose)


def _sweep(names: Iterable[str] | None, dtypes: list[torch.dtype], limit: int, verbose: bool) -> list[Result]:
    results = []
    for opinfo in ops(names):
        supported = opinfo.supported_dtypes("cpu")
        for dtype in dtypes:
            if dtype in supported:
                if verbose:  # names the op a crash happened in
                    print(f"{opinfo.name} {dtype}", file=sys.stderr, flush=True)
                result = run_op(opinfo, dtype, limit)
                if result.status in ("mismatch", "device_error") and result.op in KNOWN:
                    result = Result(
                        result.op, result.dtype, result.samples, "known", f"{KNOWN[result.op]} ({result.detail})"
                    )
                results.append(result)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the ops the test suite sweeps")
    parser.add_argument("--ops", help="comma-separated OpInfo names (e.g. linalg.lstsq,to)")
    parser.add_argument("--dtypes", default="float32,bfloat16,int64,bool", help="comma-separated torch dtypes")
    parser.add_argument("--limit-samples", type=int, default=4, help="samples per op and dtype")
    parser.add_argument("--verbose", action="store_true", help="name each op on stderr before it runs")
    parser.add_argument("--json", action="store_true", help="print every result as JSON")
    args = parser.parse_args()

    from neuroncompat import simulator

    simulator.enable(cores=2, shim=False)  # the device alone: its own op coverage
    dtypes = [getattr(torch, d) for d in args.dtypes.split(",")]
    start = time.perf_counter()
    names = args.ops.split(",") if args.ops else QUICK if args.quick else None
    results = sweep(names, dtypes, args.limit_samples, args.verbose)
    elapsed = time.perf_counter() - start
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=1))
        return
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    for r in results:
        if r.status in ("mismatch", "device_error", "known"):
            print(f"{r.status:<13}{r.op:<45}{r.dtype:<16}{r.detail}")
    print(
        f"{len(results)} (op, dtype) pairs in {elapsed:.0f} s: "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    )
    sys.exit(1 if counts.get("mismatch") or counts.get("device_error") else 0)


if __name__ == "__main__":
    main()
