"""NM105 and the settings that carry a device (`device=`, `map_location=`, `device_map=`, as keywords,
assignments or argparse defaults, dispatched by the `settings` family): each value becomes its Neuron value;
`map_location` loads to CPU, `device_map="auto"` (which loaded every weight on CPU on Neuron) is `"neuron"`.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    HookResult,
    callee_name,
    last_name,
    on,
    string_value,
    with_string_value,
)
from migrate.rules.device.literals import (
    _DEVICE_NAMES,
    _DEVICE_VALUE_NAMES,
    _fstring,
    cpu_generator_literal,
    device_literal,
    is_rank,
)
from migrate.rules.settings import setting, through

RULES: tuple[Rule, ...] = (
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
)
_MAP_AUTO = {"auto", "balanced", "balanced_low_0", "sequential"}


def _pipeline_ordinal(node: cst.BaseExpression, ctx: FileContext) -> cst.BaseExpression | None:
    if type(node) is cst.Integer and ctx.callee == "pipeline":
        return cst.SimpleString('"neuron"')
    return None


setting("NM131", r"device", through(cpu_generator_literal), assign=False)
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
