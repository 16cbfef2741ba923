"""NM131: every form of CUDA generator (`torch.Generator("cuda")`, `device=` on one, a generator made
on the pipeline's device) becomes a CPU one, which is what diffusers' `randn_tensor` samples from on Neuron (a
neuron generator crashes it); a file whose pipelines draw on the device is left to NM102.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    argument,
    code,
    family_state,
    on,
    replace_arg,
    string_value,
    with_string_value,
)
from migrate.rules.device import neuron_text
from migrate.rules.diffusers_common import is_diffusers_file

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM131",
        name="cpu-generator",
        safety="unsafe",
        safety_reason="the CPU generator's stream differs from CUDA's: the same seed draws other numbers (other images)",
        summary='`torch.Generator("cuda")` and, in diffusers scripts, `torch.Generator(device=<any device>)` -> '
        '`torch.Generator("cpu")`.',
        rationale="diffusers' `randn_tensor` samples on the CPU when the target is a NeuronCore but keeps the "
        "generator it was given, so a neuron generator (`torch.Generator(device=accelerator.device)`, the "
        "form in 26 of diffusers' 27 core training scripts) crashes it, and a CUDA one cannot be created "
        "without CUDA. A CPU generator is what diffusers reads on Neuron, and it draws the same noise on "
        'every rank, which tensor parallelism needs. A `"cuda"` literal, positional or `device=`, is rewritten in '
        "any script (the keyword form by the device family's settings, ahead of NM102); device variables and "
        "`neuron` only in diffusers scripts. "
        "A generator the script also passes to `torch.rand*(..., device=...)` draws is kept, with a note: "
        "a CPU generator cannot feed a device draw.",
        before='import torch\nfrom diffusers import DiffusionPipeline\ng = torch.Generator("cuda").manual_seed(0)\n'
        "v = torch.Generator(device=accelerator.device).manual_seed(args.seed)\n",
        after='import torch\nfrom diffusers import DiffusionPipeline\ng = torch.Generator("cpu").manual_seed(0)\n'
        'v = torch.Generator(device="cpu").manual_seed(args.seed)\n',
    ),
)


# torch random draws that take a generator; a generator passed to one that samples on a device cannot be a CPU one.
_DRAW = re.compile(
    r"\b(?:randn|rand|randint|randperm|normal|bernoulli|multinomial|poisson|randn_like|rand_like|randint_like"
    r"|normal_|uniform_|random_|exponential_|bernoulli_|cauchy_|geometric_|log_normal_)\("
)
_GENERATOR_ARG = re.compile(r"\bgenerator\s*=\s*([A-Za-z_][\w.]*)")
_ON_DEVICE = re.compile(r"\bdevice\s*=|_like\(|_\($")  # a `device=` draw, a `*_like(tensor)`, an in-place draw


def _device_draw_generators(text: str) -> frozenset[str]:
    """Names passed as `generator=` to a torch draw on a device (`torch.rand(n, device=d, generator=g)`)."""
    names: set[str] = set()
    for match in _DRAW.finditer(text):
        depth, end = 1, match.end()
        while end < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        inner = text[match.end() : end]
        if _ON_DEVICE.search(inner) or _ON_DEVICE.search(match.group(0)):
            names.update(_GENERATOR_ARG.findall(inner))
    return frozenset(names)


@dataclass
class _State:
    device_draws: frozenset[str] | None = None  # generator names that feed device draws, read on first use
    warned: set[str] = field(default_factory=set)


def _state(ctx: FileContext) -> _State:
    state = family_state(ctx, "diffusers-cuda", _State)
    if state.device_draws is None:
        state.device_draws = _device_draw_generators(ctx.text) if "generator" in ctx.text else frozenset()
    return state


def _cpu_generator(call: cst.Call, ctx: FileContext) -> cst.Call | None:
    """`torch.Generator(<a CUDA or, in a diffusers file, any non-CPU device>)` with the device `"cpu"`, else None."""
    device = argument(call, 0, "device")
    if device is None:
        return None
    value = device.value
    text = string_value(value)
    if text is not None:
        cuda = neuron_text(text) is not None
        neuron = text == "neuron" or text.startswith("neuron:")
        if not (cuda or (neuron and is_diffusers_file(ctx))):
            return None
        new = with_string_value(value, "cpu")  # type: ignore[arg-type]
    elif is_diffusers_file(ctx) and isinstance(value, cst.Name | cst.Attribute | cst.Call | cst.FormattedString):
        new = cst.SimpleString('"cpu"')
    else:
        return None
    return replace_arg(call, device, device.with_changes(value=new))


def _is_generator(call: cst.Call, ctx: FileContext) -> bool:
    return ctx.qualify(call.func) == "torch.Generator"


@on("Assign", "NM131")
def generator_binding(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """NM131 in a file whose generators also feed device draws: each assignment decides by its target.

    `g = torch.Generator(device=accelerator.device)` later used in `torch.rand(n, device=d, generator=g)`
    stays on the device (a CPU generator would raise there); the file's other generators become CPU ones.
    """
    if not ctx.enabled("NM131") or len(node.targets) != 1:
        return node
    state = _state(ctx)
    if not state.device_draws:
        return node
    call = _generator_in(node.value, ctx)
    if call is None:
        return node
    target = code(node.targets[0].target)
    if target in state.device_draws:
        if target not in state.warned:
            state.warned.add(target)
            ctx.warn("NM131", f"kept the device generator {target}: it also feeds torch random draws on the device")
        return node
    new = _cpu_generator(call, ctx)
    if new is None:
        return node
    ctx.hit("NM131")
    return node.with_changes(value=_swap(node.value, call, new))


def _generator_in(node: cst.BaseExpression, ctx: FileContext) -> cst.Call | None:
    """The `torch.Generator(...)` call of `torch.Generator(d)`, `torch.Generator(d).manual_seed(s)`, `x if c else y`."""
    if type(node) is cst.Call:
        if _is_generator(node, ctx):
            return node
        if type(node.func) is cst.Attribute:
            return _generator_in(node.func.value, ctx)
    if type(node) is cst.IfExp:
        return _generator_in(node.body, ctx) or _generator_in(node.orelse, ctx)
    return None


def _swap(node: cst.BaseExpression, old: cst.Call, new: cst.Call) -> cst.BaseExpression:
    """`node` with the call `old` (found by `_generator_in`) replaced by `new`."""
    if node is old:
        return new
    if type(node) is cst.Call and type(node.func) is cst.Attribute:
        return node.with_changes(func=node.func.with_changes(value=_swap(node.func.value, old, new)))
    if type(node) is cst.IfExp:
        return node.with_changes(body=_swap(node.body, old, new), orelse=_swap(node.orelse, old, new))
    return node
