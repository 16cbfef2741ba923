"""NM108 legacy CUDA tensor types (`torch.cuda.FloatTensor`, `LongTensor`, ...) -> dtype and device.

Older GAN and RL scripts (PyTorch-GAN, early DQN code) pick a tensor type once and build every
tensor through it::

    cuda = True if torch.cuda.is_available() else False
    Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
    valid = Tensor(imgs.size(0), 1).fill_(1.0)            # sizes
    z = Tensor(np.random.normal(0, 1, (n, latent_dim)))   # data
    real = imgs.type(Tensor)                              # a cast

Without CUDA, calling `torch.cuda.FloatTensor` raises "Torch not compiled with CUDA enabled". The
types carry a dtype and a device, which the modern API takes as arguments, so the rewrite is
mechanical where the arguments say what they are:

- `x.type(torch.cuda.FloatTensor)` or `x.type("torch.cuda.FloatTensor")` -> `x.to("neuron", torch.float32)`
  (the literal `.cuda()` becomes under NM101);
- a call with sizes (two or more positional arguments, an int, `x.size(i)`, `x.shape[i]`, `len(...)`)
  -> `torch.empty(*sizes, dtype=..., device=...)`: the legacy constructor leaves memory
  uninitialised too;
- a call with data (a list or tuple display, a NumPy array built in the call) ->
  `torch.tensor(data, dtype=..., device=...)`, which copies and converts as the constructor does;
- an alias `T = torch.cuda.X if cond else torch.X` is followed to its uses: the device is
  `"neuron" if cond else "cpu"` (the script's own choice, as with `.cuda()` under `if cuda:`), and
  the alias goes once nothing reads it. `T = torch.cuda.X` alone means `"neuron"`.

Anything else (a single argument that may be sizes or data, keywords, `isinstance(x, T)`, the
type passed on) keeps its code and gets the NM925 TODO naming the replacement; under
`NEURONCOMPAT_CUDA=redirect` it runs unchanged meanwhile (docs/cuda_redirect.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    add_kwarg,
    argument,
    code,
    kwarg,
    leading_lines,
    method_of,
    on,
    positional_args,
    string_value,
)
from migrate.rules.references import references
from migrate.rules.todo_catalogue import todo

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM108",
        name="legacy-tensor-type",
        safety="safe",
        summary="`torch.cuda.FloatTensor`-style types -> `.to(device, dtype)`, `torch.empty`/`torch.tensor`.",
        rationale="The legacy CUDA tensor types raise without CUDA. A cast `x.type(torch.cuda.X)` "
        '(the type or its name) becomes `x.to("neuron", <dtype>)`. A constructor call whose arguments '
        "are clearly sizes becomes `torch.empty(*sizes, dtype=..., device=...)` (uninitialised, as "
        "before); one given a list, a tuple or a NumPy array built in the call becomes "
        "`torch.tensor(data, dtype=..., device=...)`. An alias `T = torch.cuda.X if cond else "
        'torch.X` is followed to its uses with the device `"neuron" if cond else "cpu"`, and removed '
        "once nothing reads it. Other uses keep their code with the NM925 TODO.",
        before="import torch\nimport numpy as np\n\n"
        "Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n"
        "valid = Tensor(imgs.size(0), 1).fill_(1.0)\nz = Tensor(np.random.normal(0, 1, (n, 8)))\n"
        "real = imgs.type(Tensor)\nlabels = labels.type(torch.cuda.LongTensor)\n",
        after="import torch\nimport numpy as np\n\n"
        'valid = torch.empty(imgs.size(0), 1, dtype=torch.float32, device="neuron" if cuda else "cpu").fill_(1.0)\n'
        'z = torch.tensor(np.random.normal(0, 1, (n, 8)), dtype=torch.float32, device="neuron" if cuda else "cpu")\n'
        'real = imgs.to("neuron" if cuda else "cpu", torch.float32)\nlabels = labels.to("neuron", torch.int64)\n',
    ),
)

# legacy type name -> the `torch.<dtype>` it holds
DTYPES: dict[str, str] = {
    "FloatTensor": "float32",
    "DoubleTensor": "float64",
    "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16",
    "ByteTensor": "uint8",
    "CharTensor": "int8",
    "ShortTensor": "int16",
    "IntTensor": "int32",
    "LongTensor": "int64",
    "BoolTensor": "bool",
}
_CPU_TWINS = {name: {name} for name in DTYPES} | {"FloatTensor": {"FloatTensor", "Tensor"}}
# `T = torch.cuda.X` or `T = torch.cuda.X if cond else torch.Y`, one line, anywhere in the file.
_ALIAS = re.compile(
    r"^[ \t]*([A-Za-z_]\w*)[ \t]*=[ \t]*torch\.cuda\.(\w+)"
    r"(?:[ \t]+if[ \t]+([^\n#]+?)[ \t]+else[ \t]+torch\.(\w+))?[ \t]*(?:#[^\n]*)?$",
    re.M,
)
# Whether the file names a legacy CUDA type at all: the hooks below do nothing in the others.
_MENTION = re.compile(r"cuda(?:\.|[ \t]+import[^\n]*\b)(?:" + "|".join(DTYPES) + r")\b")
_CONDITION = re.compile(r"[A-Za-z_][\w.]*|torch\.cuda\.is_available\(\)")
# NumPy calls that return an array whatever their arguments, and random draws that do given a size.
_NUMPY_ARRAYS = {"array", "asarray", "stack", "concatenate", "vstack", "hstack", "zeros", "ones", "full", "arange"}
_NUMPY_SHAPED_DRAWS = {"rand", "randn", "random", "random_sample", "sample"}  # size as the arguments


@dataclass(frozen=True)
class LegacyType:
    """What a legacy type (or an alias of one) means: its dtype and the device expression's text."""

    dtype: str
    device: str


def _mentioned(ctx: FileContext) -> bool:
    found: bool | None = ctx.family_state.get("legacy-tensor-types")
    if found is None:
        found = ctx.family_state["legacy-tensor-types"] = bool(_MENTION.search(ctx.text))
    return found


def _aliases(ctx: FileContext) -> dict[str, LegacyType]:
    """The file's aliases of legacy CUDA types, bound by one unambiguous assignment each."""

    aliases: dict[str, LegacyType] | None = ctx.family_state.get("legacy-tensor-aliases")
    if aliases is None:
        found: dict[str, LegacyType | None] = {}
        for name, cuda_type, condition, cpu_type in _ALIAS.findall(ctx.text):
            legacy = _alias_meaning(ctx, cuda_type, condition, cpu_type)
            found[name] = legacy if name not in found or found[name] == legacy else None
        # a name also bound otherwise (`Tensor = torch.FloatTensor` in an else branch) is no alias
        aliases = {
            name: legacy
            for name, legacy in found.items()
            if legacy is not None and _bindings(ctx.text, name) == _alias_names(ctx.text).count(name)
        }
        ctx.family_state["legacy-tensor-aliases"] = aliases
    return aliases


def _alias_names(text: str) -> list[str]:
    return [match[0] for match in _ALIAS.findall(text)]


def _bindings(text: str, name: str) -> int:
    """How many lines assign `name` (`name = ...`, not `name == ...`)."""
    return len(re.findall(rf"^[ \t]*{re.escape(name)}[ \t]*=(?!=)", text, re.M))


def _alias_meaning(ctx: FileContext, cuda_type: str, condition: str, cpu_type: str) -> LegacyType | None:
    if cuda_type not in DTYPES:
        return None
    if not condition:
        return LegacyType(DTYPES[cuda_type], '"neuron"')
    if cpu_type not in _CPU_TWINS[cuda_type] or not _CONDITION.fullmatch(condition) or condition.endswith("is_cuda"):
        return None  # another dtype on CPU, or a test (`x.is_cuda`) that means something else on Neuron
    if condition == "torch.cuda.is_available()":
        condition = f"{code(ctx.module_ref('torch.neuron'))}.is_available()"  # as NM104 renames it
    return LegacyType(DTYPES[cuda_type], f'"neuron" if {condition} else "cpu"')


def _legacy(node: cst.BaseExpression, ctx: FileContext) -> LegacyType | None:
    """The legacy type `node` names: `torch.cuda.X`, its name as a string, or an alias."""
    if type(node) is cst.Name and node.value in _aliases(ctx):
        return _aliases(ctx)[node.value]
    text = string_value(node) if type(node) is cst.SimpleString else ctx.qualify(node)
    if text is not None and text.startswith("torch.cuda.") and text[len("torch.cuda.") :] in DTYPES:
        return LegacyType(DTYPES[text[len("torch.cuda.") :]], '"neuron"')
    return None


def _is_size(node: cst.BaseExpression) -> bool:
    """An int, `x.size(i)`, `x.shape[i]`, `len(...)` or `int(...)`: a dimension, never data."""
    if type(node) is cst.Integer:
        return True
    if type(node) is cst.Call:
        if type(node.func) is cst.Name and node.func.value in ("len", "int"):
            return True
        return method_of(node, "size") and len(node.args) == 1
    return type(node) is cst.Subscript and type(node.value) is cst.Attribute and node.value.attr.value == "shape"


def _is_data(node: cst.BaseExpression, ctx: FileContext) -> bool:
    """A list/tuple display or a NumPy array made in place: what the constructor copies."""
    if isinstance(node, (cst.List, cst.Tuple, cst.ListComp)):
        return True
    if type(node) is cst.BinaryOperation:  # `0.75 * np.random.normal(0, 1, (n, d))`
        return _is_data(node.left, ctx) or _is_data(node.right, ctx)
    if type(node) is not cst.Call:
        return False
    qualified = ctx.qualify(node.func) or ""
    if qualified.startswith("numpy.random."):
        draw = qualified[len("numpy.random.") :]
        if draw in _NUMPY_SHAPED_DRAWS:
            return bool(node.args)
        return kwarg(node, "size") is not None or len(positional_args(node)) >= 3  # normal(0, 1, (n, d))
    return qualified.startswith("numpy.") and qualified[len("numpy.") :] in _NUMPY_ARRAYS


def _build(node: cst.Call, factory: str, legacy: LegacyType, ctx: FileContext) -> cst.Call:
    torch = ctx.module_ref("torch")
    call = node.with_changes(func=cst.Attribute(value=torch, attr=cst.Name(factory)))
    if not call.args:
        call = call.with_changes(args=[cst.Arg(cst.Integer("0"))])  # `torch.cuda.FloatTensor()`: empty, 1-d
    call = add_kwarg(call, "dtype", f"{code(torch)}.{legacy.dtype}")
    return add_kwarg(call, "device", legacy.device)


@on("Call", "NM108")
def legacy_tensor_call(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    """NM108: `x.type(<legacy type>)` and `<legacy type>(sizes or data)`."""
    if not ctx.enabled("NM108") or not _mentioned(ctx):
        return node
    if method_of(node, "type") and type(node.func) is cst.Attribute:
        target = argument(node, 0, "dtype")
        legacy = _legacy(target.value, ctx) if target is not None else None
        if target is None or legacy is None or any(a.star for a in node.args):
            return node
        rest = [a for a in node.args if a is not target and a.keyword is not None and a.keyword.value == "non_blocking"]
        if len(rest) != len(node.args) - 1:
            return node  # other arguments (`async=` of torch < 1.0) we do not know how to carry
        torch = code(ctx.module_ref("torch"))
        device = cst.Arg(cst.parse_expression(legacy.device))
        args = [device, cst.Arg(cst.parse_expression(f"{torch}.{legacy.dtype}")), *rest]
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        args = [a.with_changes(comma=comma) for a in args[:-1]] + [
            args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        ]
        ctx.hit("NM108")
        return node.with_changes(func=node.func.with_changes(attr=cst.Name("to")), args=args)
    legacy = _legacy(node.func, ctx)
    if legacy is None or any(a.star == "**" or a.keyword is not None for a in node.args):
        return node
    positional = [a.value for a in node.args if not a.star]
    if len(positional) == len(node.args):
        sizes = len(positional) != 1 or _is_size(positional[0])
    else:  # `Tensor(imgs.shape[0], *patch)`: sizes when what is written out is
        sizes = len(positional) >= 2 or (len(positional) == 1 and _is_size(positional[0]))
    if sizes:
        ctx.hit("NM108")
        return _build(node, "empty", legacy, ctx)
    if len(positional) == len(node.args) == 1 and _is_data(positional[0], ctx):
        ctx.hit("NM108")
        return _build(node, "tensor", legacy, ctx)
    return node


def _is_alias_statement(stmt: cst.BaseStatement, ctx: FileContext) -> str | None:
    """The alias an assignment binds, for a statement that is exactly `T = torch.cuda.X [if c else torch.Y]`."""
    if type(stmt) is not cst.SimpleStatementLine or len(stmt.body) != 1 or type(stmt.body[0]) is not cst.Assign:
        return None
    assign = stmt.body[0]
    if len(assign.targets) != 1 or type(assign.targets[0].target) is not cst.Name:
        return None
    name = assign.targets[0].target.value
    if name not in _aliases(ctx):
        return None
    value = assign.value.body if type(assign.value) is cst.IfExp else assign.value
    return name if _legacy(value, ctx) is not None else None


@on("SimpleStatementLine", "NM925")
def legacy_tensor_leftover(node: cst.SimpleStatementLine, ctx: FileContext) -> cst.SimpleStatementLine:
    """NM925 on a statement that still uses a legacy CUDA type (or its alias) after NM108."""
    if not _mentioned(ctx) or _is_alias_statement(node, ctx) is not None:
        return node
    if _uses_legacy(node, ctx):
        todo(ctx, "NM925")
    return node


@on("If", "NM925")
def legacy_tensor_test(node: cst.If, ctx: FileContext) -> cst.If:
    """NM925 on `if isinstance(x, torch.cuda.FloatTensor):`, whose test is no simple statement."""
    if _mentioned(ctx) and _uses_legacy(node.test, ctx):
        todo(ctx, "NM925")
    return node


def _uses_legacy(node: cst.CSTNode, ctx: FileContext) -> bool:
    return bool(references([node]) & _aliases(ctx).keys()) or _LegacyReference.found_in(node, ctx)


class _LegacyReference(cst.CSTVisitor):
    """Whether a statement still names `torch.cuda.<X>Tensor`."""

    def __init__(self, ctx: FileContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.found = False

    @classmethod
    def found_in(cls, node: cst.CSTNode, ctx: FileContext) -> bool:
        visitor = cls(ctx)
        node.visit(visitor)
        return visitor.found

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        qualified = self.ctx.qualify(node) or ""
        if qualified.startswith("torch.cuda.") and qualified[len("torch.cuda.") :] in DTYPES:
            self.found = True
        return not self.found

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        text = string_value(node) or ""
        if text.startswith("torch.cuda.") and text[len("torch.cuda.") :] in DTYPES:
            self.found = True


@on("Module", "NM108")
def unused_aliases(node: cst.Module, ctx: FileContext) -> cst.Module:
    """A module-level alias NM108 rewrote every use of goes (its comments move to the next statement)."""
    if not ctx.enabled("NM108") or not _mentioned(ctx) or not _aliases(ctx):
        return node
    bound = {index: _is_alias_statement(stmt, ctx) for index, stmt in enumerate(node.body)}
    bound = {index: name for index, name in bound.items() if name is not None}
    if not bound:
        return node
    read = references(stmt for index, stmt in enumerate(node.body) if index not in bound)
    body = list(node.body)
    for index in sorted(bound, reverse=True):
        if bound[index] in read:
            continue
        stmt = body.pop(index)
        if index < len(body):
            body[index] = body[index].with_changes(
                leading_lines=_merged(leading_lines(stmt), leading_lines(body[index]))
            )
        ctx.hit("NM108")
    return node.with_changes(body=body)


def _merged(removed: Sequence[cst.EmptyLine], following: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """The lines above a removed statement and the next one: its comments kept, blank lines not doubled."""

    def blanks(lines: Sequence[cst.EmptyLine]) -> int:
        return next((i for i, line in enumerate(lines) if line.comment is not None), len(lines))

    lead = max(blanks(removed), blanks(following))
    return [cst.EmptyLine()] * lead + [*removed[blanks(removed) :], *following[blanks(following) :]]
