"""NM1xx device placement: device sources, comparisons, `device_map`, ordinals, pipelines.

Rationale and examples per rule: docs/rules.md (NM1xx). Only device *sources* are
rewritten (literals in device positions, `device = ...`, defaults, `torch.device(...)`,
`device_map`); uses such as `.to(device)` stay, so diffs stay small.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    HookResult,
    add_kwarg,
    argument,
    callee_name,
    code,
    has_star_kwargs,
    kwarg,
    last_name,
    method_of,
    on,
    positional_args,
    remove_arg,
    replace_arg,
    string_value,
    with_string_value,
)
from migrate.rules.settings import setting, through

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM101",
        name="cuda-method",
        safety="safe",
        summary='`x.cuda()` -> `x.to("neuron")`, keeping an explicit index, a device argument and `non_blocking`.',
        rationale='`.cuda()` only targets CUDA. `.to("neuron")` moves to the process\'s current NeuronCore. '
        'An integer literal stays an index (`.cuda(1)` -> `.to("neuron:1")`); a rank (`local_rank`, '
        '`args.gpu`, `LOCAL_RANK`) becomes the index-less `"neuron"`, which is each rank\'s own core '
        "whether the runtime shows a rank only its cores (as `neuron:0`) or all of them with its own "
        "current (docs/simulator.md, per-rank visibility); any other argument, a `torch.device` or a "
        '`"cuda:0"` string, is passed on to `.to(...)` (renamed by NM102 where it is set). '
        "The module `torch.cuda` is not a call and is left to NM104.",
        before="model = model.cuda()\nbatch = batch.cuda(local_rank, non_blocking=True)\nlayer.cuda(device)\n",
        after='model = model.to("neuron")\nbatch = batch.to("neuron", non_blocking=True)\nlayer.to(device)\n',
    ),
    Rule(
        id="NM102",
        name="device-literal",
        safety="unsafe",
        safety_reason='a `torch.Generator(device="cuda")` becomes a CPU generator, so seeded random streams differ',
        summary='`"cuda"`/`"cuda:N"`/`f"cuda:{r}"` in device positions -> `neuron`.',
        rationale="Device positions are `.to(...)`, `device=`, `torch.device(...)`, `map_location=`, "
        "assignments to device-named variables (`device`, `DEVICE`, `*_device`, `device_type`), "
        "argparse `--device` defaults and dataclass `device` fields. The assignment is the source "
        "of truth, so later `.to(device)` calls need no change. Conditional arms are rewritten "
        "together with their `torch.cuda.is_available()` guard (NM104), never folded to CPU. "
        "Strings elsewhere (prints, logs, comments) are prose and never touched. "
        '`torch.Generator(device="cuda")` becomes a CPU generator, which diffusers and samplers accept. '
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
        id="NM103",
        name="device-comparison",
        safety="safe",
        summary='Comparisons of device values with `"cuda"` follow the renamed value.',
        rationale='Context rule 3: once `device = "cuda"` becomes `"neuron"`, `if device == "cuda"` '
        "would silently flip (nanoGPT turns autocast off, FastChat raises `Invalid device`). "
        "Comparisons whose other side is a device-named value or `<x>.type`/`<x>.device.type` "
        'are renamed consistently, including `"cuda" in device`. A test that guards CUDA-only code (events, '
        '`memory_summary`) keeps its CUDA test with NM903\'s TODO, directly (`if device.type == "cuda":`) or '
        'through a flag (`use_cuda = device.type == "cuda"` then `if use_cuda:`): renamed, Neuron would take the '
        "CUDA branch and fail where the original took its other one.",
        before='if device == "cuda":\n    dtype = "bfloat16"\npin = "cuda" in device\n',
        after='if device == "neuron":\n    dtype = "bfloat16"\npin = "neuron" in device\n',
    ),
    Rule(
        id="NM105",
        name="device-map",
        safety="unsafe",
        safety_reason="a model that `auto` would have split or offloaded is placed whole on one NeuronCore per process",
        summary='`device_map` forms -> `"neuron"`, the process\'s own NeuronCore (one process or per rank).',
        rationale='accelerate\'s `get_max_memory` has no Neuron branch, so `device_map="auto"` '
        "(also balanced/sequential) loads every weight on CPU with no error. It becomes "
        '`device_map="neuron"`: transformers loads onto `torch.device("neuron")`, the current core of '
        "the process, so in a multi-process script (torchrun, accelerate, Trainer-family scripts) each "
        "rank loads onto its own core whether the runtime shows a rank only its cores or all of them "
        '(an explicit `f"neuron:{LOCAL_RANK}"` would be wrong under the first reading, docs/simulator.md). '
        '`{"": local_rank}` and other rank expressions become `"neuron"` too; a literal index is kept '
        '(`{"": 0}` -> `"neuron:0"` in one process), and `{"": expr}` of another expression keeps it: '
        '`{"": f"neuron:{expr}"}`. TRL\'s removed `get_kbit_device_map()` is replaced the same way.',
        before='model = AutoModelForCausalLM.from_pretrained(name, device_map="auto")\n'
        'ref = AutoModelForCausalLM.from_pretrained(name, device_map={"": local_rank})\n',
        after='model = AutoModelForCausalLM.from_pretrained(name, device_map="neuron")\n'
        'ref = AutoModelForCausalLM.from_pretrained(name, device_map="neuron")\n',
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
    Rule(
        id="NM107",
        name="pipeline-device",
        safety="safe",
        summary='`pipeline(...)` that loads a model and names no device gets `device="neuron"`.',
        rationale="With no device, `pipeline()` resolves to CPU on Neuron (there is no neuron branch "
        "in pipelines/base.py). Only pipelines that load the model themselves (a string model id) "
        "are changed; a pipeline given a model object keeps where that model was placed.",
        before='pipe = pipeline("text-generation", model="gpt2")\n',
        after='pipe = pipeline("text-generation", model="gpt2", device="neuron")\n',
    ),
)

_DEVICE_NAMES = r"(?i)device|dev|\w+_device|device_(?:type|str|name)"
_DEVICE_VALUE_NAMES = re.compile(r"(?i)device|dev|\w+_device|device_(?:type|str|name)")
_ORDINAL_NAMES = re.compile(r"(?:ddp_)?(?:local_)?rank|gpu_id|gpu|device_id|(?:local_)?process_index|gpu_index")
_RANK_CALLS = frozenset({"get_rank", "get_local_rank", "current_device", "local_rank", "get_node_local_rank"})
_RANK_TEXT = re.compile(r"\bLOCAL_RANK\b|\bRANK\b|local_rank|process_index")
_CUDA = re.compile(r"cuda(:\d+)?")
_MAP_AUTO = {"auto", "balanced", "balanced_low_0", "sequential"}


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


def device_literal(node: cst.BaseExpression, ctx: FileContext) -> cst.BaseExpression | None:
    """The leaf rewrite for device values: plain strings and f-strings starting with `cuda`."""
    if type(node) is cst.SimpleString:
        text = string_value(node)
        new = neuron_text(text) if text is not None else None
        if new is None:
            return None
        if ctx.callee == "Generator":
            return with_string_value(node, "cpu")
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


# Device positions that take a variable: `map_location=loc`, `device=dev`, `.to(loc)`, `torch.device(loc)`.
_MAP_LOCATION_USE = re.compile(r"\bmap_location\s*=\s*([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)\s*[,)]")
_DEVICE_USE = re.compile(r"(?:\bdevice\s*=\s*|\.to\(\s*|\bdevice\(\s*)([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)\s*[,)]")


@dataclass
class _DeviceVariables:
    """Names the file passes in device positions, whatever they are called (`loc`, `self.target`)."""

    devices: frozenset[str]  # used as a device somewhere
    map_only: frozenset[str]  # used only as `map_location=`


def _device_variables(ctx: FileContext) -> _DeviceVariables:
    found = ctx.family_state.get("device-variables")
    if found is None:
        devices = frozenset(_DEVICE_USE.findall(ctx.text))
        found = _DeviceVariables(devices, frozenset(_MAP_LOCATION_USE.findall(ctx.text)) - devices)
        ctx.family_state["device-variables"] = found
    return found


def _plain_name(node: cst.BaseExpression) -> str | None:
    """`x` or `x.y` exactly as written (no parentheses or spaces), else None: the only shapes `_DEVICE_USE` and
    `_MAP_LOCATION_USE` capture, read off the node instead of rendering it (this runs on every assignment)."""
    if type(node) is cst.Name:
        return None if node.lpar else node.value
    if type(node) is cst.Attribute and type(node.value) is cst.Name and not node.lpar and not node.value.lpar:
        dot = node.dot
        if type(dot.whitespace_before) is cst.SimpleWhitespace and type(dot.whitespace_after) is cst.SimpleWhitespace:
            if not dot.whitespace_before.value and not dot.whitespace_after.value:
                return f"{node.value.value}.{node.attr.value}"
    return None


@on("Assign", "NM102")
def device_variable(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """NM102 through a variable: `loc = f"cuda:{self.gpu_id}"` later passed as `map_location=loc`.

    Names that read like devices are settings (above); any other name is followed to where the
    file uses it. A value used only to load checkpoints becomes `"cpu"` (as `map_location` literals
    do); one used as a device becomes the NeuronCore.
    """
    if len(node.targets) != 1 or not ctx.enabled("NM102"):
        return node
    if not isinstance(node.value, (cst.SimpleString, cst.FormattedString, cst.Call, cst.IfExp)):
        return node
    target = node.targets[0].target
    name = _plain_name(target)
    if name is None or re.fullmatch(_DEVICE_NAMES, last_name(target) or ""):
        return node
    variables = _device_variables(ctx)
    if name in variables.devices:
        new = through(device_literal)(node.value, ctx)
    elif name in variables.map_only:
        new = _cpu_location(node.value, ctx)
    else:
        return node
    if new is None:
        return node
    ctx.hit("NM102")
    return node.with_changes(value=new)


def _pipeline_ordinal(node: cst.BaseExpression, ctx: FileContext) -> cst.BaseExpression | None:
    if type(node) is cst.Integer and ctx.callee == "pipeline":
        return cst.SimpleString('"neuron"')
    return None


setting("NM102", _DEVICE_NAMES, through(device_literal))


def _cpu_location(node: cst.BaseExpression, ctx: FileContext) -> cst.BaseExpression | None:
    """`_map_location` through conditionals; `"cpu" if cuda else "cpu"` folds to `"cpu"`."""
    new = through(_map_location)(node, ctx)
    if type(new) is cst.IfExp and string_value(new.body) == "cpu" and string_value(new.orelse) == "cpu":
        return new.orelse
    return new


def _map_location(node: cst.BaseExpression, ctx: FileContext) -> cst.BaseExpression | None:
    """Checkpoints load to CPU; `load_state_dict` then copies into the model wherever it is."""
    if device_literal(node, ctx) is None:
        return None
    if type(node) is cst.SimpleString:
        return with_string_value(node, "cpu")
    return cst.SimpleString('"cpu"')  # an f-string or `"cuda:{}".format(r)`


setting("NM102", r"map_location", _cpu_location, assign=False)
setting("NM106", r"device", through(_pipeline_ordinal))


def _per_rank(ctx: FileContext) -> cst.BaseExpression:
    """Each rank's own core: the index-less device, the current core of the process (see `is_rank`)."""
    return cst.SimpleString('"neuron"')


def _device_map(node: cst.BaseExpression, ctx: FileContext) -> cst.BaseExpression | None:
    if type(node) is cst.SimpleString:
        text = string_value(node)
        if text in _MAP_AUTO or text == "cuda":
            if text in _MAP_AUTO and not ctx.facts.trainer and not ctx.facts.multi_process:
                ctx.warn("NM105", f'device_map="{text}" loaded every weight on CPU on Neuron; now "neuron"')
            return with_string_value(node, "neuron")
        if text is not None and text.startswith("cuda:"):
            return with_string_value(node, "neuron" + text[4:])
        return None
    if type(node) is cst.Integer:
        return _per_rank(ctx) if ctx.facts.multi_process else cst.SimpleString(f'"neuron:{node.value}"')
    if type(node) is cst.Dict and len(node.elements) == 1:
        element = node.elements[0]
        if type(element) is cst.DictElement and string_value(element.key) == "":
            value = element.value
            if type(value) is cst.Integer and ctx.facts.multi_process or is_rank(value):
                return _per_rank(ctx)  # a hard-coded 0 under torchrun would put every rank on core 0
            if type(value) is cst.Integer:
                new: cst.BaseExpression = cst.SimpleString(f'"neuron:{value.value}"')
            elif isinstance(value, (cst.SimpleString, cst.FormattedString)):
                new_value = device_literal(value, ctx)
                if new_value is None:
                    return None
                new = new_value
            elif _DEVICE_VALUE_NAMES.fullmatch(last_name(value) or ""):
                return None  # `{"": device}`: a device value, renamed where it is set (NM102)
            else:
                new = _fstring("neuron:", value)
            return node.with_changes(elements=[element.with_changes(value=new)])
    if type(node) is cst.Call and callee_name(node) == "get_kbit_device_map":
        return _per_rank(ctx)
    return None


setting("NM105", r"device_map", through(_device_map))


@on("Call", "NM101", "NM102", "NM103", "NM106", "NM107")
def cuda_method(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    """NM101 `.cuda()`, NM102/NM106 the positional device of `.to()`/`torch.device()`, NM107."""
    func = node.func
    if method_of(node, "cuda") and type(func) is cst.Attribute and ctx.enabled("NM101"):
        if ctx.qualify(func) == "torch.cuda":  # `torch.cuda` the module is not a tensor method
            return node
        if any(arg.star for arg in node.args):  # `.cuda(*a)`/`.cuda(**kw)`: which device it names is unknown
            return node
        ctx.hit("NM101")
        args = list(node.args)
        positional = positional_args(node)
        device = kwarg(node, "device")
        given = positional[0] if positional else device
        if given is not None:
            index = given.value
            target: cst.BaseExpression = index  # a `torch.device` or an index `.to` resolves itself
            if type(index) is cst.Integer:
                target = cst.SimpleString(f'"neuron:{index.value}"')
            elif is_rank(index):
                target = cst.SimpleString('"neuron"')
            else:
                target = through(device_literal)(index, ctx) or index
            moved = given.with_changes(value=target, keyword=None, equal=cst.MaybeSentinel.DEFAULT)
            if args.index(given) == 0:
                args[0] = moved
            else:  # `.cuda(non_blocking=True, device=d)`: `.to` takes the device first
                args.remove(given)
                args = _recomma([moved, *args])
        else:
            first = cst.Arg(cst.SimpleString('"neuron"'))
            if args:
                first = first.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.insert(0, first)
        return node.with_changes(func=func.with_changes(attr=cst.Name("to")), args=args)
    if method_of(node, "to") or ctx.qualify(func) == "torch.device":
        positional = positional_args(node)
        if not positional:
            return node
        arg = positional[0]
        value = arg.value
        if ctx.enabled("NM102"):
            new = through(device_literal)(value, ctx)
            if new is not None:
                ctx.hit("NM102")
                node = replace_arg(node, arg, arg.with_changes(value=new))
                if method_of(node, "to"):
                    return node
                rank = argument(node, 1, "index")
                if rank is not None and is_rank(rank.value):  # `torch.device("cuda", local_rank)`
                    if reads_device_index(ctx):
                        return replace_arg(node, rank, rank.with_changes(value=rank_core(rank.value, ctx)))
                    return remove_arg(node, rank)
                dropped = _string_rank(value)  # `torch.device(f"cuda:{local_rank}")`
                if rank is None and dropped is not None and reads_device_index(ctx):
                    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                    moved = node.args[0].with_changes(comma=comma)
                    return node.with_changes(args=[moved, cst.Arg(rank_core(dropped, ctx)), *node.args[1:]])
                return node
        if method_of(node, "to") and ctx.enabled("NM106"):
            if type(value) is cst.Integer:
                ctx.hit("NM106")
                return replace_arg(node, arg, arg.with_changes(value=cst.SimpleString(f'"neuron:{value.value}"')))
            if is_rank(value):
                ctx.hit("NM106")
                return replace_arg(node, arg, arg.with_changes(value=cst.SimpleString('"neuron"')))
        return node
    if ctx.enabled("NM106") and (callee_name(node) or "") in _DATA_PARALLEL:
        return _replica_device(node, ctx)
    if (
        method_of(node, "startswith")
        and ctx.enabled("NM103")
        and type(func) is cst.Attribute
        and is_device_side(func.value)
    ):
        positional = positional_args(node)
        text = string_value(positional[0].value) if positional else None
        if text is not None and text.startswith("cuda") and type(positional[0].value) is cst.SimpleString:
            ctx.hit("NM103")
            return replace_arg(
                node,
                positional[0],
                positional[0].with_changes(value=with_string_value(positional[0].value, "neuron" + text[4:])),
            )
        return node
    if (
        callee_name(node) == "pipeline"
        and ctx.enabled("NM107")
        and ctx.qualify(func) in (None, "transformers.pipeline")
    ):
        if kwarg(node, "device") or kwarg(node, "device_map") or has_star_kwargs(node):
            return node
        model = kwarg(node, "model")
        positional = positional_args(node)
        model_value = model.value if model else (positional[1].value if len(positional) > 1 else None)
        if isinstance(model_value, (cst.SimpleString, cst.Name, cst.Attribute)) and _loads_by_name(model_value):
            ctx.hit("NM107")
            return add_kwarg(node, "device", '"neuron"')
    return node


_DATA_PARALLEL = frozenset({"DistributedDataParallel", "DDP", "FullyShardedDataParallel", "FSDP"})


def _replica_device(node: cst.Call, ctx: FileContext) -> cst.Call:
    """`DDP(model, device_ids=[local_rank], output_device=local_rank)`: the rank's own core, `current_device()`.

    DDP moves each input batch to `device_ids[0]`, so the ids stay (distributed.py says why); an index that
    is the rank would name another process's core where a rank sees only its own.
    """
    current = f"{cst.Module([]).code_for_node(ctx.module_ref('torch.neuron'))}.current_device()"
    for name in ("device_ids", "output_device", "device_id"):
        arg = kwarg(node, name)
        if arg is None:
            continue
        value = arg.value
        if type(value) is cst.List and len(value.elements) == 1 and is_rank(value.elements[0].value):
            element = value.elements[0]
            new: cst.BaseExpression = value.with_changes(
                elements=[element.with_changes(value=cst.parse_expression(current))]
            )
        elif type(value) is not cst.List and is_rank(value):
            new = cst.parse_expression(current)
        else:
            continue
        ctx.hit("NM106")
        node = replace_arg(node, arg, arg.with_changes(value=new))
    return node


def _recomma(args: list[cst.Arg]) -> list[cst.Arg]:
    """`args` reordered: a comma after each but the last, which keeps none."""
    out = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in args[:-1]]
    return [*out, args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)]


def _loads_by_name(node: cst.BaseExpression) -> bool:
    """A string literal, or a name that reads like a model id (`model_name`, `args.model_id`)."""
    if type(node) is cst.SimpleString:
        return True
    name = last_name(node) or ""
    return bool(re.search(r"name|path|_id$|checkpoint", name))


def is_device_side(node: cst.BaseExpression) -> bool:
    """A device value NM103 compares: `device`, `args.device`, `x.type`, `x.device.type`."""
    if type(node) is cst.Attribute and node.attr.value == "type":
        return True
    name = last_name(node)
    return name is not None and _DEVICE_VALUE_NAMES.fullmatch(name) is not None


@on("Comparison", "NM103")
def device_comparison(node: cst.Comparison, ctx: FileContext) -> cst.Comparison:
    """NM103: `device == "cuda"`, `"cuda" in device`, `x.device.type != "cuda"`."""
    if not ctx.enabled("NM103") or len(node.comparisons) != 1:
        return node
    target = node.comparisons[0]
    left, right = node.left, target.comparator
    membership = isinstance(target.operator, (cst.In, cst.NotIn))
    if not membership and not isinstance(target.operator, (cst.Equal, cst.NotEqual, cst.Is, cst.IsNot)):
        return node
    # `device == "cuda"` renames the right side; `"cuda" in device` / `"cuda" == device` the left.
    if not membership and type(right) is cst.SimpleString and is_device_side(left):
        new = neuron_text(string_value(right) or "")
        if new is not None:
            ctx.hit("NM103")
            return node.with_changes(comparisons=[target.with_changes(comparator=with_string_value(right, new))])
    if type(left) is cst.SimpleString and is_device_side(right):
        new = neuron_text(string_value(left) or "")
        if new is not None:
            ctx.hit("NM103")
            return node.with_changes(left=with_string_value(left, new))
    return node


@on("ImportFrom", "NM105")
def drop_get_kbit_device_map(node: cst.ImportFrom, ctx: FileContext) -> HookResult:
    """TRL 1.x removed `get_kbit_device_map`; its calls are replaced above, so drop the import."""
    if not ctx.enabled("NM105") or isinstance(node.names, cst.ImportStar):
        return node
    if not (type(node.module) is cst.Name and node.module.value == "trl"):
        return node
    names = [a for a in node.names if not (type(a.name) is cst.Name and a.name.value == "get_kbit_device_map")]
    if len(names) == len(node.names):
        return node
    ctx.hit("NM105")
    if not names:
        return cst.RemoveFromParent()
    if node.names[-1] not in names:  # the last name went: the new last takes its comma (or none)
        names[-1] = names[-1].with_changes(comma=node.names[-1].comma)
    return node.with_changes(names=names)
