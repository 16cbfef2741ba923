"""The statements of a file that no hook of its rule families can change: the traversal does not visit inside them.

libcst's traversal rebuilds every node it visits, whether a hook changes it or not; in library code that passes the
prefilter most of a file is methods that mention none of the tokens of the families switched on for it. A statement
whose code lines hold none of those tokens, no `import` (the import map is built while visiting) and no name bound by
an import that holds one (`ac()` after `from torch.cuda.amp import autocast as ac`) is *cold*: its hooks find nothing
to act on, so not visiting inside it keeps it identical (libcst leaves an unvisited subtree as parsed) at a third of
the cost. Its own frame and hooks still run (as for any statement), only its inside is not visited.

Where a statement spans comes from CPython's tree, which the engine builds anyway (the nesting check and the
docstring lines): its statements are libcst's, a simple statement line holding one CPython statement per `;`. The
walk descends into the bodies of hot classes and functions only (elsewhere a hot statement is visited whole), and
gives up (no statement cold) where the two trees do not line up. A file with a family whose hooks gather facts from
statements without its tokens (`Family.whole_file`) has no cold statement. With the generate data flow on (a file
calling `.generate(`), uses of a name anywhere in its scope count, so only whole functions (a scope of their own)
are passed over.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Container, Sequence
from typing import NamedTuple, cast

import libcst as cst

from migrate.prefilter import PROSE


class Span(NamedTuple):
    """The lines of one CPython statement (decorators included), the line its own code starts on (the `def` of a
    decorated function, where libcst positions it) and, for a compound statement, the spans of its blocks in libcst's
    order (`_blocks`), so the reports can locate a libcst statement without rendering the tree (`statement_lines`)."""

    kind: type[ast.stmt]
    start: int
    end: int
    line: int
    blocks: tuple[tuple[Span, ...], ...]

    @property
    def body(self) -> tuple[Span, ...] | None:
        """A class's or function's body: the scopes the cold walk descends into."""
        return self.blocks[0] if self.kind in _SCOPES else None


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# libcst's compound statements and the CPython statements each one is
COMPOUND: dict[type[cst.CSTNode], tuple[type[ast.stmt], ...]] = {
    cst.If: (ast.If,),
    cst.For: (ast.For, ast.AsyncFor),
    cst.While: (ast.While,),
    cst.With: (ast.With, ast.AsyncWith),
    cst.Try: (ast.Try,),
    cst.TryStar: tuple(getattr(ast, name) for name in ("TryStar",) if hasattr(ast, name)),  # Python 3.11+
    cst.FunctionDef: (ast.FunctionDef, ast.AsyncFunctionDef),
    cst.ClassDef: (ast.ClassDef,),
    cst.Match: (ast.Match,),
}

ALL_COMPOUND = frozenset(kind for kinds in COMPOUND.values() for kind in kinds)
_TRY: tuple[type[ast.stmt], ...] = (ast.Try, *COMPOUND[cst.TryStar])


def statement_spans(body: Sequence[ast.stmt]) -> tuple[Span, ...]:
    """The spans of a CPython body's statements, with the blocks of its compound statements."""
    return tuple(
        Span(
            type(statement),
            min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", ()))]),
            statement.end_lineno or statement.lineno,
            statement.lineno,
            tuple(statement_spans(block) for block in _blocks(statement)),
        )
        for statement in body
    )


def _blocks(statement: ast.stmt) -> tuple[Sequence[ast.stmt], ...]:
    """A compound statement's blocks in the order libcst holds them (an `elif` is the `if` alone in an `orelse`)."""
    if isinstance(statement, ast.If | ast.For | ast.AsyncFor | ast.While):
        return (statement.body, statement.orelse)
    if isinstance(statement, _TRY):
        tried = cast("ast.Try", statement)  # or an `ast.TryStar`, which has the same fields
        return (tried.body, *(handler.body for handler in tried.handlers), tried.orelse, tried.finalbody)
    if isinstance(statement, ast.Match):
        return tuple(case.body for case in statement.cases)
    if isinstance(statement, ast.With | ast.AsyncWith | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return (statement.body,)
    return ()


# An import and what it names: `from torch.cuda.amp import autocast as ac`, `import torch.cuda as tc`,
# `from x import (a,\n b)`; anywhere, so one after a `;` (or in a string: more names only make more statements hot)
_IMPORT = re.compile(rb"(?:\bfrom[ \t]+[\w.]+[ \t]+)?\bimport[ \t]*(\([^)]*\)|[^\n;#]*)")
_IMPORTED = re.compile(rb"([\w.]+)(?:\s+as\s+(\w+))?")


def with_imported_names(data: bytes, tokens: re.Pattern[bytes]) -> re.Pattern[bytes] | None:
    """`tokens`, `import` (the import map is built from every import) and the names bound by the imports that hold
    one of `tokens`: a hook that acts on `torch.cuda.amp.autocast`
    acts on `ac()` after `from torch.cuda.amp import autocast as ac`, a use with none of its family's tokens.
    None (nothing is cold) for such an import continued by a backslash or importing `*`."""
    names: set[bytes] = set()
    for match in _IMPORT.finditer(data):
        if not tokens.search(match[0]):
            continue
        listed = match[1]
        if b"*" in listed or listed.rstrip().endswith(b"\\"):
            return None
        for dotted, alias in _IMPORTED.findall(listed.strip(b"()")):
            names.add(alias or dotted.partition(b".")[0])
    imported = rb"|\b(?:" + b"|".join(sorted(names)) + rb")\b" if names else b""
    return re.compile(rb"import|" + tokens.pattern + imported)


def hot_lines(data: bytes, tokens: re.Pattern[bytes], prose: Container[int]) -> list[int]:
    """The sorted 1-based lines of `data` where `tokens` match, comment, doctest and docstring lines (`prose`) aside.

    The families' tokens never span a line break, so a match is on the line it starts on; after one, the search
    goes on at the next line (`device` occurs many times on a line of library code).
    """
    lines: list[int] = []
    line, counted, position = 1, 0, 0
    while (match := tokens.search(data, position)) is not None:
        start = match.start()
        line += data.count(b"\n", counted, start)
        counted = start
        if line not in prose and not PROSE.match(data, data.rfind(b"\n", 0, start) + 1):
            lines.append(line)
        position = data.find(b"\n", start) + 1
        if not position:
            break
    return lines


def cold_statements(
    module: cst.Module,
    data: bytes,
    spans: tuple[Span, ...],
    tokens: re.Pattern[bytes],
    prose: Container[int],
    functions_only: bool,
) -> frozenset[int]:
    """The ids of the outermost statements of `module` (parsed from `data`, whose CPython statements are at `spans`)
    whose code lines hold no match of `tokens` (the families'), no import and no name an import holding one binds.

    `prose`: the docstring lines. `functions_only`: only functions are cold (the generate data flow counts every use
    of a name in its scope). Empty where libcst's statements and CPython's `spans` do not line up, or where a lone
    carriage return (a line break to CPython) would put CPython's line numbers off the count of `\n`.
    """
    if data.count(b"\r") != data.count(b"\r\n"):
        return frozenset()
    tokens_and_names = with_imported_names(data, tokens)
    if tokens_and_names is None:
        return frozenset()
    cold: set[int] = set()
    if not _walk(module.body, spans, hot_lines(data, tokens_and_names, prose), functions_only, cold):
        return frozenset()
    return frozenset(cold)


def aligned(body: Sequence[cst.CSTNode], spans: tuple[Span, ...]) -> list[tuple[cst.CSTNode, tuple[Span, ...]]] | None:
    """Each libcst statement of `body` with the CPython statements of `spans` it holds: a simple statement line one
    per `;`-separated statement, a compound statement its own. None where the two do not line up (the cold walk and
    `statement_lines.from_spans` then fall back to visiting and rendering everything)."""
    pairs: list[tuple[cst.CSTNode, tuple[Span, ...]]] = []
    index = 0
    for statement in body:
        kind = type(statement)
        if kind is cst.SimpleStatementLine:
            count = len(statement.body)  # type: ignore[attr-defined]
            group = spans[index : index + count]
            if not count or len(group) != count or any(span.kind in ALL_COMPOUND for span in group):
                return None
        else:
            count = 1
            group = spans[index : index + 1]
            if not group or group[0].kind not in COMPOUND.get(kind, ()):
                return None
        index += count
        pairs.append((statement, group))
    return pairs if index == len(spans) else None


def _walk(
    body: Sequence[cst.BaseStatement], spans: tuple[Span, ...], hot: list[int], functions_only: bool, cold: set[int]
) -> bool:
    pairs = aligned(body, spans)
    if pairs is None:
        return False
    for statement, group in pairs:
        kind = type(statement)
        start, end = group[0].start, group[-1].end
        first_hot = bisect.bisect_left(hot, start)
        if (first_hot == len(hot) or hot[first_hot] > end) and (not functions_only or kind is cst.FunctionDef):
            cold.add(id(statement))
        elif kind in (cst.ClassDef, cst.FunctionDef) and type(statement.body) is cst.IndentedBlock:  # type: ignore[attr-defined]
            inner = group[0].body
            if inner is None or not _walk(statement.body.body, inner, hot, functions_only, cold):  # type: ignore[attr-defined]
                return False
    return True
