"""What the rewrites leave behind that a reviewer would send back (issue #41, class 8), tidied in the same pass.

- An `if` whose whole body the migration removed (`if quantization_config is not None: pass`, once NM209
  dropped the quantized keyword it set) goes.
- An `if`/`else` whose branches the migration made identical (`optimizer_cls = torch.optim.AdamW` in both,
  once NM210 replaced the 8-bit optimizer of one) becomes that one branch.
- A label that names CUDA or a GPU right before a value NM104 now reads from Neuron
  (`print("CUDA available:", torch.neuron.is_available())`, `f"GPU count: {torch.neuron.device_count()}"`) names
  Neuron: the output would otherwise say CUDA is available on a Trainium host. Other prose is never touched.

Only what the migration changed is touched: the `if` must hold a rewrite, so an empty or duplicated `if` the
script had before stays; and a test is dropped only when evaluating it has no effect (names, attributes,
literals, comparisons and boolean operations of those), so nothing the script did is lost with it.
"""

from __future__ import annotations

import re

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import HookResult, code, leading_lines, on, string_value, with_string_value
from migrate.rules.retired import retire_reads
from migrate.rules.todo_catalogue import flatten

RULES: tuple[Rule, ...] = ()  # no rules of its own: it finishes what the other families' rewrites leave

_LEAVES = frozenset({cst.Name, cst.Integer, cst.Float, cst.SimpleString})


def _inert(node: cst.BaseExpression) -> bool:
    """Whether evaluating `node` only reads: no call, subscript or anything else that may run code or raise."""
    kind = type(node)
    if kind in _LEAVES:
        return True
    if kind is cst.Attribute:
        return _inert(node.value)  # type: ignore[attr-defined]
    if kind is cst.UnaryOperation:
        return _inert(node.expression)  # type: ignore[attr-defined]
    if kind is cst.BooleanOperation:
        return _inert(node.left) and _inert(node.right)  # type: ignore[attr-defined]
    if kind is cst.Comparison:
        return _inert(node.left) and all(_inert(c.comparator) for c in node.comparisons)  # type: ignore[attr-defined]
    return False


def _tidy_candidate(node: cst.If, ctx: FileContext) -> bool:
    """An `if` the migration rewrote inside (its frame holds a hit), not an `elif`, with an inert test."""
    return bool(ctx.frames[-1].hits) and not ctx.elif_clause and _inert(node.test)


def _only_pass(block: cst.BaseSuite) -> bool:
    return type(block) is cst.IndentedBlock and all(
        type(stmt) is cst.SimpleStatementLine and all(type(small) is cst.Pass for small in stmt.body)
        for stmt in block.body
    )


@on("If")
def emptied_if(node: cst.If, ctx: FileContext) -> HookResult:
    """`if quantization_config is not None: pass` left by a removal goes, with the comments inside it (they were
    about the removed lines); one with comments above it stays, as those may be about more than the `if`."""
    if node.orelse is not None or not _only_pass(node.body) or not _tidy_candidate(node, ctx):
        return node
    if any(line.comment is not None for line in node.leading_lines):
        return node
    retire_reads(ctx, node.test)
    return cst.RemoveFromParent()


@on("If")
def identical_branches(node: cst.If, ctx: FileContext) -> HookResult:
    """`if use_8bit_adam: opt = torch.optim.AdamW` / `else: opt = torch.optim.AdamW` -> `opt = torch.optim.AdamW`."""
    orelse = node.orelse
    if type(orelse) is not cst.Else or type(node.body) is not cst.IndentedBlock:
        return node
    if type(orelse.body) is not cst.IndentedBlock or not _tidy_candidate(node, ctx):
        return node
    body = list(node.body.body)
    if [code(stmt) for stmt in body] != [code(stmt) for stmt in orelse.body.body]:
        return node
    retire_reads(ctx, node.test)
    first = body[0].with_changes(leading_lines=[*node.leading_lines, *leading_lines(body[0])])
    return flatten(ctx, [first, *body[1:]])


_CUDA_WORDS = re.compile(r"\b(CUDA|[Cc]uda|GPU|[Gg]pu)(s?)\b")
_NEURON_WORDS = {"CUDA": "Neuron", "Cuda": "Neuron", "cuda": "neuron", "GPU": "NeuronCore", "Gpu": "NeuronCore"}


def _relabelled(text: str) -> str:
    return _CUDA_WORDS.sub(lambda found: _NEURON_WORDS.get(found.group(1), "NeuronCore") + found.group(2), text)


class _ReadsNeuron(cst.CSTVisitor):
    """Whether an expression calls `torch.neuron.*` or `torch.accelerator.*`."""

    def __init__(self, ctx: FileContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.found = False

    def visit_Call(self, node: cst.Call) -> bool:
        qualified = self.ctx.qualify(node.func) or ""
        self.found = self.found or qualified.startswith(("torch.neuron.", "torch.accelerator."))
        return not self.found


def _reads_neuron(node: cst.BaseExpression, ctx: FileContext) -> bool:
    reads = _ReadsNeuron(ctx)
    node.visit(reads)
    return reads.found


@on("Call", "NM104")
def cuda_label(node: cst.Call, ctx: FileContext) -> cst.Call:
    """`print("CUDA available:", torch.neuron.is_available())` -> `print("Neuron available:", ...)`, where NM104
    rewrote the value in this statement."""
    if not (type(node.func) is cst.Name and node.func.value == "print") or "NM104" not in ctx.frames[-1].hits:
        return node
    args = list(node.args)
    for index, (label, value) in enumerate(zip(args, args[1:])):
        text = string_value(label.value) if type(label.value) is cst.SimpleString and not label.keyword else None
        if text is None or value.keyword or not _CUDA_WORDS.search(text) or not _reads_neuron(value.value, ctx):
            continue
        args[index] = label.with_changes(value=with_string_value(label.value, _relabelled(text)))  # type: ignore[arg-type]
    return node if args == list(node.args) else node.with_changes(args=args)


@on("FormattedString", "NM104")
def cuda_label_in_fstring(node: cst.FormattedString, ctx: FileContext) -> cst.FormattedString:
    """`f"GPU count: {torch.neuron.device_count()}"` -> `f"NeuronCore count: {...}"`, as `cuda_label`."""
    if "NM104" not in ctx.frames[-1].hits:
        return node
    parts = list(node.parts)
    for index, (text, value) in enumerate(zip(parts, parts[1:])):
        if type(text) is not cst.FormattedStringText or type(value) is not cst.FormattedStringExpression:
            continue
        if _CUDA_WORDS.search(text.value) and _reads_neuron(value.expression, ctx):
            parts[index] = text.with_changes(value=_relabelled(text.value))
    return node if parts == list(node.parts) else node.with_changes(parts=parts)
