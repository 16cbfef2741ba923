"""NM305-NM307 static-shape hygiene for training: drop_last, collator padding, compile backend.

Rationale per rule: docs/rules.md (NM305-NM307). Every new input shape is a new Neuron graph (about a minute to
compile on hardware), so training batches get fixed shapes where the script decides them.
"""

from __future__ import annotations

import re

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    add_kwarg,
    argument,
    callee_name,
    kwarg,
    last_name,
    may_add,
    on,
    remove_arg,
    replace_arg,
    string_value,
)

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM305",
        name="train-drop-last",
        safety="unsafe",
        safety_reason="`drop_last=True` drops the ragged last batch of every epoch",
        summary="Training `DataLoader(...)` gets `drop_last=True`.",
        rationale="The last partial batch has a new shape and compiles a new graph. Only loaders "
        "that shuffle or whose dataset/variable name says train are changed; eval and test loaders "
        "keep every sample because dropping would change metrics (context rule 12). A loader given a "
        "`batch_sampler` (it decides the batches, and DataLoader refuses `drop_last` beside it) or "
        "`**kwargs` (which may carry one) is left alone.",
        before="train_loader = DataLoader(train_ds, batch_size=8, shuffle=True)\n",
        after="train_loader = DataLoader(train_ds, batch_size=8, shuffle=True, drop_last=True)\n",
    ),
    Rule(
        id="NM306",
        name="collator-pad-multiple",
        safety="unsafe",
        safety_reason="padding to a multiple of 128 changes batch shapes and memory; unmasked padding changes outputs",
        summary="Padding collators get `pad_to_multiple_of=128`.",
        rationale="`DataCollatorWithPadding`, `DataCollatorForSeq2Seq` and "
        "`DataCollatorForLanguageModeling` pad to the longest sample, a new length nearly every "
        "batch. Padding to a multiple of 128 bounds the number of shapes. A smaller multiple "
        "(alpaca-lora's 8) is raised to 128. TRL collators already do this on Neuron.",
        before="collator = DataCollatorWithPadding(tokenizer)\n",
        after="collator = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=128)\n",
    ),
    Rule(
        id="NM307",
        name="compile-backend",
        safety="safe",
        summary='`torch.compile(m)` -> `torch.compile(m, backend="neuron", dynamic=False)`; CUDA modes dropped.',
        rationale='AWS: add `backend="neuron"` and remove CUDA-specific modes (`reduce-overhead` '
        "means CUDA graphs, `max-autotune` Triton). `dynamic=False` keeps Dynamo from making "
        "shape-polymorphic graphs Neuron cannot compile. A CUDA `torch_compile_mode` in "
        "TrainingArguments is dropped (Trainer picks the neuron backend itself).",
        before='import torch\nmodel = torch.compile(model, mode="max-autotune")\n',
        after='import torch\nmodel = torch.compile(model, backend="neuron", dynamic=False)\n',
    ),
)

_COLLATORS = ("DataCollatorWithPadding", "DataCollatorForSeq2Seq", "DataCollatorForLanguageModeling")
_EVAL = re.compile(r"(?i)eval|val|test|dev")
_CUDA_MODES = ("reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _train_loader(node: cst.Call, ctx: FileContext) -> bool:
    shuffle = kwarg(node, "shuffle")
    dataset = argument(node, 0, "dataset")
    name = (last_name(dataset.value) if dataset else None) or ""
    if _EVAL.search(name):
        return False
    if "train" in name.lower():
        return True
    return shuffle is not None and type(shuffle.value) is cst.Name and shuffle.value.value == "True"


@on("Call", "NM305", "NM306", "NM307")
def static_shapes(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    name = callee_name(node)
    if name == "DataLoader" and ctx.enabled("NM305"):
        if may_add(node, "drop_last") and kwarg(node, "batch_sampler") is None and _train_loader(node, ctx):
            ctx.hit("NM305")
            return add_kwarg(node, "drop_last", "True")
        return node
    if name in _COLLATORS and ctx.enabled("NM306"):
        existing = kwarg(node, "pad_to_multiple_of")
        if existing is None:
            if not may_add(node, "pad_to_multiple_of"):
                return node
            ctx.hit("NM306")
            return add_kwarg(node, "pad_to_multiple_of", "128")
        if type(existing.value) is cst.Integer and int(existing.value.value) < 128:
            ctx.hit("NM306")
            return replace_arg(node, existing, existing.with_changes(value=cst.Integer("128")))
        return node
    if ctx.enabled("NM307"):
        if ctx.qualify(node.func) == "torch.compile":
            if not may_add(node, "backend"):
                return node
            ctx.hit("NM307")
            mode = kwarg(node, "mode")
            if mode is not None and string_value(mode.value) in _CUDA_MODES:
                node = remove_arg(node, mode)
            node = add_kwarg(node, "backend", '"neuron"')
            if kwarg(node, "dynamic") is None:
                node = add_kwarg(node, "dynamic", "False")
            return node
        mode = kwarg(node, "torch_compile_mode")
        if mode is not None and string_value(mode.value) in _CUDA_MODES:
            ctx.hit("NM307")
            return remove_arg(node, mode)
    return node
