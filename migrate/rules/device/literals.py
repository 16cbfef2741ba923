"""NM102, NM106: what a device value is (a `"cuda"`/`"cuda:i"` literal, an f-string, `"cuda:{}".format(r)`)
and what a rank is (`local_rank`, `int(os.environ["LOCAL_RANK"])`, `dist.get_rank()`), and the Neuron value each
becomes: `cuda:<rank>` is the process's own core (`"neuron"`), so a per-rank device never names core 0 for all.
"""

from __future__ import annotations

import re
from typing import Literal

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    callee_name,
    code,
    last_name,
    method_of,
    positional_args,
    string_value,
    with_string_value,
)

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM102",
        name="device-literal",
        safety="safe",
        summary='`"cuda"`/`"cuda:N"`/`f"cuda:{r}"` in device positions -> `neuron`.',
        rationale="Device positions are `.to(...)`, `device=`, `torch.device(...)`, `map_location=`, "
        "assignments to device-named variables (`device`, `DEVICE`, `*_device`, `device_type`), "
        "argparse `--device` defaults and dataclass `device` fields. The assignment is the source "
        "of truth, so later `.to(device)` calls need no change. Conditional arms are rewritten "
        "together with their `torch.cuda.is_available()` guard (NM104), never folded to CPU. "
        "Strings elsewhere (prints, logs, comments) are prose and never touched. "
        '`torch.Generator(device="cuda")` is NM131\'s (a CPU generator, which changes seeded streams). '
        'A rank as the index (`f"cuda:{local_rank}"`, `torch.device("cuda", rank)`) is dropped: the '
        'index-less `"neuron"` is each rank\'s own core under either reading of per-rank visibility '
        "(NM101); a literal index stays. Where the file reads a device's `.index` (`dist.barrier(device_ids="
        "[device.index])`, `set_device(device.index)`), which the index-less device has as None, a rank index in "
        '`torch.device(...)` stays the rank\'s own core: `torch.device("neuron", rank % torch.neuron.device_count())`, '
        'as NM106 sets the device. `f"cuda"` is a device string too.',
        before='import torch\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n'
        'x = torch.zeros(4, device="cuda:0")\n',
        after='import torch\ndevice = "neuron" if torch.cuda.is_available() else "cpu"\n'
        'x = torch.zeros(4, device="neuron:0")\n',
    ),
    Rule(
        id="NM106",
        name="device-ordinal",
        safety="safe",
        summary='Device ordinals: a rank -> the process\'s own core, `.to(0)` -> `neuron:0`, `pipeline(device=0)` -> `"neuron"`.',
        rationale="A bare int resolves through `torch.accelerator` at best; `pipeline(device=0)` "
        "silently runs on CPU on Neuron. `.to(0)` is made explicit (`neuron:0`); a rank (`.to(local_rank)`, "
        '`.to(self.gpu_id)`) becomes `.to("neuron")`, each rank\'s own core whether the runtime shows a '
        "rank only its cores (renumbered from 0) or all of them (docs/simulator.md, per-rank visibility). "
        "For the same reason `torch.cuda.set_device(local_rank)` (renamed by NM104) becomes "
        "`torch.neuron.set_device(local_rank % torch.neuron.device_count())` (index 0 of one visible core, "
        "or the rank's own of all), and a rank in DDP's `device_ids`/`output_device` becomes "
        "`torch.neuron.current_device()`.",
        before="import torch\ntorch.neuron.set_device(local_rank)\nmodel.to(local_rank)\n"
        'pipe = pipeline("text-generation", model=name, device=0)\n',
        after="import torch\ntorch.neuron.set_device(local_rank % torch.neuron.device_count())\n"
        'model.to("neuron")\npipe = pipeline("text-generation", model=name, device="neuron")\n',
    ),
)

_DEVICE_NAMES = r"(?i)device|dev|\w+_device|device_(?:type|str|name)"
_DEVICE_VALUE_NAMES = re.compile(r"(?i)device|dev|\w+_device|device_(?:type|str|name)")
_ORDINAL_NAMES = re.compile(r"(?:ddp_)?(?:local_)?rank|gpu_id|gpu|device_id|(?:local_)?process_index|gpu_index")
_RANK_CALLS = frozenset({"get_rank", "get_local_rank", "current_device", "local_rank", "get_node_local_rank"})
_RANK_TEXT = re.compile(r"\bLOCAL_RANK\b|\bRANK\b|local_rank|process_index")
_CUDA = re.compile(r"cuda(:\d+)?")


def neuron_text(text: str) -> str | None:
    """`cuda` -> `neuron`, `cuda:1` -> `neuron:1`; anything else -> None."""
    match = _CUDA.fullmatch(text)
    return None if match is None else "neuron" + (match.group(1) or "")


def is_rank(node: cst.BaseExpression) -> bool:
    """Whether a device index is the process's rank: `local_rank`, `args.gpu`, `self.gpu_id`,
    `int(os.environ["LOCAL_RANK"])`, `dist.get_rank()`, `accelerator.local_process_index`.

    Such an index names the rank's own core, which the index-less `"neuron"` is under either reading of
    per-rank visibility; the index itself is wrong where a rank sees only its own cores, as `neuron:0`.
    """
    name = last_name(node)
    if name is not None:
        return _ORDINAL_NAMES.fullmatch(name) is not None
    if type(node) is cst.Call:
        if callee_name(node) in _RANK_CALLS:
            return True
        if type(node.func) is cst.Name and node.func.value == "int" and node.args:
            return is_rank(node.args[0].value)
    if type(node) is cst.Subscript or type(node) is cst.Call:  # `os.environ["LOCAL_RANK"]`, `.get("RANK", 0)`
        text = cst.Module([]).code_for_node(node)
        return "environ" in text and _RANK_TEXT.search(text) is not None
    return False


def _fstring(prefix: str, expr: cst.BaseExpression) -> cst.FormattedString:
    code = cst.Module([]).code_for_node(expr)
    quote: Literal["'", '"'] = "'" if '"' in code else '"'
    return cst.FormattedString(
        parts=[cst.FormattedStringText(prefix), cst.FormattedStringExpression(expression=expr)],
        start=f"f{quote}",
        end=quote,
    )


def cpu_generator_literal(node: cst.BaseExpression, ctx: FileContext) -> cst.BaseExpression | None:
    """NM131's keyword form in any script: `torch.Generator(device="cuda")` -> `device="cpu"` (never a neuron one).

    A setting ahead of NM102's, so that the one rewrite a reviewer must look at (other random streams) is counted
    under the unsafe rule it belongs to, and NM102's device renames stay safe."""
    if ctx.callee != "Generator" or type(node) is not cst.SimpleString:
        return None
    text = string_value(node)
    return with_string_value(node, "cpu") if text is not None and neuron_text(text) is not None else None


def device_literal(node: cst.BaseExpression, ctx: FileContext) -> cst.BaseExpression | None:
    """The leaf rewrite for device values: plain strings and f-strings starting with `cuda`."""
    if type(node) is cst.SimpleString:
        text = string_value(node)
        new = neuron_text(text) if text is not None else None
        if new is None:
            return None
        return with_string_value(node, new)
    if type(node) is cst.FormattedString and node.parts:
        first = node.parts[0]
        quote = node.end
        if type(first) is cst.FormattedStringText and len(node.parts) == 1 and _CUDA.fullmatch(first.value):
            return cst.SimpleString(f"{quote}neuron{first.value[4:]}{quote}")  # `f"cuda"`: no placeholder at all
        if type(first) is cst.FormattedStringText and first.value.startswith("cuda:"):
            if first.value == "cuda:" and len(node.parts) == 2 and _rank_part(node.parts[1]):
                return cst.SimpleString(f"{quote}neuron{quote}")  # `f"cuda:{local_rank}"`: the rank's own core
            return node.with_changes(parts=[first.with_changes(value="neuron" + first.value[4:]), *node.parts[1:]])
    if type(node) is cst.Call and method_of(node, "format") and type(node.func) is cst.Attribute:
        template = node.func.value  # `"cuda:{}".format(args.gpu)` (pytorch/examples)
        text = string_value(template)
        if type(template) is cst.SimpleString and text is not None and text.startswith("cuda:{"):
            positional = positional_args(node)
            if text == "cuda:{}" and len(node.args) == 1 and positional and is_rank(positional[0].value):
                return with_string_value(template, "neuron")
            renamed = with_string_value(template, "neuron" + text[4:])
            return node.with_changes(func=node.func.with_changes(value=renamed))
    return None


def _string_rank(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """The rank in `f"cuda:{local_rank}"` or `"cuda:{}".format(args.gpu)`, the index `device_literal` drops."""
    if type(node) is cst.FormattedString and len(node.parts) == 2 and _rank_part(node.parts[1]):
        first = node.parts[0]
        if type(first) is cst.FormattedStringText and first.value == "cuda:":
            return node.parts[1].expression  # type: ignore[attr-defined]
    if type(node) is cst.Call and method_of(node, "format") and type(node.func) is cst.Attribute:
        positional = positional_args(node)
        if string_value(node.func.value) == "cuda:{}" and len(node.args) == 1 and positional:
            return positional[0].value if is_rank(positional[0].value) else None
    return None


# `device.index`, `self.device.index`: a read of a device's index (`str.index(...)`, a call, is no such read).
_INDEX_READ = re.compile(r"(?<![\w.])((?:\w+\.)?\w+)\.index\b(?!\s*\()")


def reads_device_index(ctx: FileContext) -> bool:
    """Whether the file reads the index of a device value (`dist.barrier(device_ids=[device.index])`).

    Such a file needs the index a rank-indexed `torch.device("cuda", rank)` carried: the index-less device has
    `index` None, and `barrier`/`set_device`/DDP given `[None]` fail (issue #41).
    """
    found = ctx.family_state.get("reads-device-index")
    if found is None:
        names = (match.rpartition(".")[2] for match in _INDEX_READ.findall(ctx.text))
        found = any(_DEVICE_VALUE_NAMES.fullmatch(name) for name in names)
        ctx.family_state["reads-device-index"] = found
    return bool(found)


def rank_core(index: cst.BaseExpression, ctx: FileContext) -> cst.BaseExpression:
    """`index % torch.neuron.device_count()`: a rank's own core as an index, under either reading of per-rank
    visibility (0 where a rank sees only its cores, the rank where it sees all), as NM106 sets the device."""
    count = f"{code(ctx.module_ref('torch.neuron'))}.device_count()"
    spaced = {"whitespace_before": cst.SimpleWhitespace(" "), "whitespace_after": cst.SimpleWhitespace(" ")}
    return cst.BinaryOperation(left=index, operator=cst.Modulo(**spaced), right=cst.parse_expression(count))


def _rank_part(part: cst.BaseFormattedStringContent) -> bool:
    return (
        type(part) is cst.FormattedStringExpression
        and part.conversion is None
        and part.format_spec is None
        and is_rank(part.expression)
    )


def is_device_side(node: cst.BaseExpression) -> bool:
    """A device value NM103 compares: `device`, `args.device`, `x.type`, `x.device.type`."""
    if type(node) is cst.Attribute and node.attr.value == "type":
        return True
    name = last_name(node)
    return name is not None and _DEVICE_VALUE_NAMES.fullmatch(name) is not None
