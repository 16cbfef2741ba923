"""NM301-NM304 generation: inputs stay on CPU, static KV cache, prompt padding, no vLLM.

docs/rules.md (NM301-NM304), docs/gaps.md#generate_inputs. Neuron compiles one graph per shape: a static cache
with `cache_implementation="static"` gives transformers a fixed-size decode step (and its
auto-compile picks `backend="neuron", dynamic=False`), padded prompts bound the number of
prefill shapes, and inputs left on CPU are moved per step by `generate()` itself.
"""

from __future__ import annotations

import re

import libcst as cst

from migrate.context import FileContext
from migrate.prefilter import FORWARDED
from migrate.registry import Rule
from migrate.rules.base import (
    add_kwarg,
    callee_name,
    has_star_kwargs,
    kwarg,
    last_name,
    may_add,
    method_of,
    on,
    positional_args,
    remove_arg,
    replace_arg,
    string_value,
)

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM301",
        name="generate-inputs-on-cpu",
        safety="safe",
        summary="Drop `.to(device)`/`.cuda()` on tensors that only flow into `generate()`.",
        rationale="transformers moves generate inputs to the model's device right before each "
        "forward so that Neuron callers can keep them on CPU; a growing input tensor on the device "
        "would recompile every step. A tensor also used in a forward pass, a loss or a metric keeps "
        "its `.to(...)` (context rule 1); shape reads (`.shape`, `len()`) do not count as uses. "
        "Data flow is tracked per function. Only in scripts that load with a `device_map` (whose "
        "hooks move inputs); a model moved with `.to(device)` needs its inputs there too.",
        before='model = AutoModelForCausalLM.from_pretrained(name, device_map="neuron")\n'
        'inputs = tokenizer(prompt, return_tensors="pt").to(model.device)\n'
        "out = model.generate(**inputs, max_new_tokens=32)\n",
        after='model = AutoModelForCausalLM.from_pretrained(name, device_map="neuron")\n'
        'inputs = tokenizer(prompt, return_tensors="pt")\n'
        "out = model.generate(**inputs, max_new_tokens=32)\n",
    ),
    Rule(
        id="NM302",
        name="static-cache",
        safety="safe",
        summary='`model.generate(...)` gets `cache_implementation="static"`.',
        rationale="With a dynamic cache every decode step has a new shape and compiles a new graph. "
        "A static cache keeps one shape, and transformers auto-compiles it for Neuron. Calls that "
        "already choose a cache, or forward `**generation_kwargs` that might, are left alone; "
        "vLLM engines (`LLM(...).generate`) are not transformers models and are skipped, and so are "
        "calls with two positional arguments (`model.generate(idx, max_new_tokens)`: nanoGPT's and "
        "minGPT's own sampling loops; transformers' second parameter is `generation_config`).",
        before="out = model.generate(**inputs, max_new_tokens=32)\n",
        after='out = model.generate(**inputs, max_new_tokens=32, cache_implementation="static")\n',
    ),
    Rule(
        id="NM303",
        name="pad-prompts",
        safety="unsafe",
        safety_reason="prompts get up to 127 more pad tokens: shapes change, outputs match only where padding is "
        "masked",
        summary="Prompts tokenized for `generate()` are padded to a multiple of 128 (left side).",
        rationale="Each distinct prompt length is a distinct prefill graph. `padding=True, "
        "pad_to_multiple_of=128` buckets lengths (it pads even a single prompt); decoder-only "
        "generation needs left padding. Applied only to tokenizer calls whose result flows only "
        "into `generate()`, and only when the script sets a pad token (padding needs one).",
        before="tokenizer.pad_token = tokenizer.eos_token\n"
        'inputs = tokenizer(prompt, return_tensors="pt")\nout = model.generate(**inputs)\n',
        after="tokenizer.pad_token = tokenizer.eos_token\n"
        'inputs = tokenizer(prompt, return_tensors="pt", padding=True, pad_to_multiple_of=128, padding_side="left")\n'
        "out = model.generate(**inputs)\n",
    ),
    Rule(
        id="NM304",
        name="no-vllm-generation",
        safety="unsafe",
        safety_reason="generation moves from vLLM to `model.generate`: slower, and sampled completions differ",
        summary='`GRPOConfig(use_vllm=True, vllm_*=...)` -> `use_vllm=False, cache_implementation="static"`.',
        rationale="vLLM does not run on TorchNeuron; TRL's online trainers fall back to "
        "`model.generate`, which needs a static cache to compile once. The `vllm_*` settings are "
        "dropped. Generation is slower than with vLLM.",
        before='args = GRPOConfig(output_dir="out", use_vllm=True, vllm_mode="colocate")\n',
        after='args = GRPOConfig(output_dir="out", use_vllm=False, cache_implementation="static")\n',
    ),
)

_TOKENIZER = re.compile(r"(?i)\w*(tokenizer|tok|processor)")


def _strip_move(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """`x.to(...)`/`x.cuda(...)` -> `x`; None when the expression is not a device move."""
    if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in ("to", "cuda"):
        if node.func.attr.value == "to":
            positional = positional_args(node)
            if len(node.args) != 1 or not positional or _is_dtype(positional[0].value):
                return None
        return node.func.value
    return None


def _is_dtype(node: cst.BaseExpression) -> bool:
    name = last_name(node) or ""
    return name.startswith(("float", "bfloat", "int", "half")) or name == "dtype"


def _tokenizer_call(node: cst.BaseExpression) -> cst.Call | None:
    if type(node) is cst.Call and _TOKENIZER.fullmatch(last_name(node.func) or "") and kwarg(node, "return_tensors"):
        return node
    return None


def _pad(call: cst.Call) -> cst.Call:
    padding = kwarg(call, "padding")
    if padding is not None and string_value(padding.value) == "max_length" or has_star_kwargs(call):
        return call  # `**kwargs` may already choose the padding
    if padding is None:
        call = add_kwarg(call, "padding", "True")
    if kwarg(call, "pad_to_multiple_of") is None:
        call = add_kwarg(call, "pad_to_multiple_of", "128")
    if kwarg(call, "padding_side") is None:
        call = add_kwarg(call, "padding_side", '"left"')
    return call


@on("Assign", "NM301", "NM303")
def generate_input_candidates(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """Queue `name = <tokenized or moved tensor>` for the generate-only check (see flow.py)."""
    target = node.targets[0].target
    if len(node.targets) != 1 or type(target) is not cst.Name:
        return node
    value = node.value
    if type(value) is cst.Call and ctx.qualify(value.func) == "vllm.LLM":
        ctx.vllm_engines.add(target.value)
        return node
    inner = _strip_move(value)
    tokenized = _tokenizer_call(inner if inner is not None else value)
    pad = tokenized is not None and ctx.enabled("NM303") and "pad_token" in ctx.text
    move = inner is not None and ctx.enabled("NM301") and _hooks_move_inputs(ctx)
    if not (move or pad):
        return node
    rule_ids = tuple(r for r, on_ in (("NM301", move), ("NM303", pad)) if on_)

    def fix(assign: cst.CSTNode) -> cst.CSTNode:
        assert type(assign) is cst.Assign
        new_value = assign.value
        if move:
            new_value = _strip_move(new_value) or new_value
        if pad and type(new_value) is cst.Call:
            new_value = _pad(new_value)
        return assign.with_changes(value=new_value)

    ctx.candidate(target.value, fix, rule_ids)
    return node


@on("Call", "NM301", "NM302", "NM304")
def generate_call(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    if method_of(node, "generate"):
        return _generate(node, ctx)
    if (callee_name(node) or "").endswith("Config") and ctx.enabled("NM304"):
        use_vllm = kwarg(node, "use_vllm")
        if use_vllm is not None and not (type(use_vllm.value) is cst.Name and use_vllm.value.value == "False"):
            ctx.hit("NM304")
            node = replace_arg(node, use_vllm, use_vllm.with_changes(value=cst.Name("False")))
            for arg in list(node.args):
                if arg.keyword is not None and arg.keyword.value.startswith("vllm_"):
                    node = remove_arg(node, arg)
            if may_add(node, "cache_implementation"):
                node = add_kwarg(node, "cache_implementation", '"static"')
    return node


def _hooks_move_inputs(ctx: FileContext) -> bool:
    """Whether the script loads with a `device_map`: accelerate's hooks then move CPU inputs to the
    model's core at each forward. A model placed with `.to(device)` has no hooks, and CPU inputs
    would meet its weights on `neuron` (a device-mismatch error), so its inputs keep their move."""
    return "device_map" in ctx.text


def _generate(node: cst.Call, ctx: FileContext) -> cst.Call:
    receiver = node.func.value if type(node.func) is cst.Attribute else None
    if type(receiver) is cst.Name and receiver.value in ctx.vllm_engines:
        return node
    if ctx.enabled("NM301") and _hooks_move_inputs(ctx):
        for arg in node.args:
            stripped = _strip_move(arg.value)
            if stripped is not None:
                ctx.hit("NM301")
                node = replace_arg(node, arg, arg.with_changes(value=stripped))
    if not ctx.enabled("NM302") or kwarg(node, "cache_implementation") is not None:
        return node
    for arg in node.args:
        if arg.star == "**" and FORWARDED.fullmatch(last_name(arg.value) or ""):
            return node
        if arg.keyword is not None and arg.keyword.value in ("generation_config", "past_key_values"):
            return node
    if not node.args:
        return node
    # transformers' 2nd parameter is `generation_config`: `model.generate(idx, max_new_tokens, ...)` is a
    # model's own sampling loop (nanoGPT's sample.py, minGPT), which takes no `cache_implementation`
    if sum(1 for arg in node.args if arg.keyword is None and not arg.star) > 1:
        return node
    ctx.hit("NM302")
    return add_kwarg(node, "cache_implementation", '"static"')
