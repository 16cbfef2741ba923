"""Migrate one file's bytes: prefilter, one parse, one rule traversal, import fix-up, verify.

The engine never touches the file system; `migrate.runner` reads and writes. Working on bytes
lets libcst detect and keep the encoding (PEP 263 cookie, BOM) and line endings.

A pass can change a fact another rule decides by (a TODO that names `device_map`, an import
another rule queued), so a changed file is migrated again until a pass changes nothing, as
ruff's fix loop does: the output is always a fixed point, and running neuron-migrate on its own
output changes nothing. Nearly every file settles in one pass (the second only confirms it).
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

import libcst as cst

from migrate.cold_statements import Span, cold_statements, statement_spans
from migrate.context import FileContext
from migrate.facts import FileFacts, wants_shim
from migrate.imports import SHIM, add_imports
from migrate.markers import SKIP_FILE, TODO_PREFIX, without_todos
from migrate.names import ImportMap
from migrate.options import Options
from migrate.parser_limits import cpython_tree
from migrate.prefilter import code_lines, docstring_lines, may_need_migration, only_forwarding_generate
from migrate.render import render
from migrate.results import FileResult, Finding, Rewrite, TextChange, find_todos
from migrate.rule_families import ALL, active_families, rules_off, statement_tokens
from migrate.statement_lines import statement_lines
from migrate.transform import MigrationTransformer

_TODO = TODO_PREFIX.strip().encode()
_SHIMMED = (b"torch", b"transformers", b"trl", b"accelerate", b"peft", b"diffusers")


# Passes before a file that still changes is reported as an internal error (a rule that undoes
# another's rewrite would otherwise loop forever); real files settle in one or two.
MAX_PASSES = 5


def migrate_source(data: bytes, path: str, options: Options = Options()) -> FileResult:
    """Return what migrating `data` (the bytes of the file at `path`) produces: the fixed point.

    Each further pass starts from the previous output; the result reports every pass's rewrites
    and notes, and the change from the original text to the final one.
    """
    result = _migrate_once(data, path, options)
    for _ in range(MAX_PASSES - 1):
        if result.status != "changed":
            return result
        assert result.new is not None
        again = _migrate_once(result.new, path, options, compiled=True)
        if again.status == "unchanged":
            return result
        if again.status != "changed":
            return _not_converging(path, f"pass 2 or later gave {again.status}: {again.error}")
        result = _merged(result, again)
    if result.status == "changed":
        assert result.new is not None
        if _migrate_once(result.new, path, options, compiled=True).status != "unchanged":
            return _not_converging(path, f"still changing after {MAX_PASSES} passes")
    return result


def _merged(first: FileResult, later: FileResult) -> FileResult:
    """One result for two passes: the first's input, the later's output, both passes' rewrites and notes."""
    hits = first.hits + later.hits
    warnings = list(dict.fromkeys([*first.warnings, *later.warnings]))
    old = first.changes[0].old
    back = _line_map(old, first.changes[0].new)  # the later pass's lines are lines of the first pass's output
    rewrites = first.rewrites + [r._replace(line=back(r.line)) for r in later.rewrites]
    return FileResult(
        first.path,
        "changed",
        new=later.new,
        hits=hits,
        rewrites=sorted(rewrites, key=_by_line),
        todos=later.todos,
        warnings=warnings,
        changes=[TextChange(old, later.changes[0].new)],
    )


def _not_converging(path: str, detail: str) -> FileResult:
    return FileResult(
        path,
        "internal-error",
        error=f"{path}: internal error: the migration does not reach a fixed point ({detail}); "
        "file left unchanged, please report this",
    )


def _migrate_once(data: bytes, path: str, options: Options, compiled: bool = False) -> FileResult:
    """One pass: parse, traverse with the file's rule families, add imports, verify the output parses.

    `compiled`: `data` is a previous pass's output, which CPython's parser already accepted (the
    check below), so it needs no nesting check (`cpython_tree` compiles the same bytes and can only
    refuse bytes that do not compile); its docstring lines come from that check (`_VERIFIED`), which also says
    whether it is provably a fixed point already.
    """
    if SKIP_FILE.search(data):
        return FileResult(path, "skipped")
    known = _remembered(data) if compiled else None
    if known is not None and known.settled:  # the previous pass provably reached the fixed point
        return FileResult(path, "unchanged")
    rules_may_apply = not options.prefilter or may_need_migration(data)
    if not rules_may_apply and not (options.shim and _may_want_shim(data)):
        return FileResult(path, "unchanged")
    # CPython's parser, before libcst's: libcst's crashes on deep nesting, which CPython refuses; and its tree
    # says which lines are docstrings, where a token (`model.generate(...)` in an example) is prose
    tree, refused = (None, None) if compiled else cpython_tree(data, path)
    if refused is not None:
        return FileResult(path, "error", error=refused[0], error_line=refused[1])
    prose: set[int] = set()
    if rules_may_apply and options.prefilter:
        if compiled:
            prose = known.prose if known is not None else _parsed_prose(data)
        else:
            prose = docstring_lines(tree) if tree is not None else set()
    if prose:
        rules_may_apply = may_need_migration(data, prose)
    if rules_may_apply and options.prefilter and tree is not None and _TODO not in data:  # (a parse lists TODOs)
        # library code handing its settings on to a submodel's `generate`: nothing a rule rewrites
        rules_may_apply = not only_forwarding_generate(data, prose, tree)
    # where each statement is, for the statements the traversal need not visit (none without the prefilter)
    spans = None
    if options.prefilter:
        spans = statement_spans(tree.body) if tree is not None else known.spans if known is not None else None
    tree = None  # not kept alive beside libcst's tree (on a 50,000-line file, hundreds of MiB)
    code = code_lines(data, prose) if rules_may_apply and options.prefilter else b""
    # the families whose tokens the file's code holds (every one without the prefilter): only those are imported and run
    families = (active_families(code) if options.prefilter else ALL) if rules_may_apply else ()
    if not families and not (options.shim and _may_want_shim(data)):
        return FileResult(path, "unchanged")
    rules_may_apply = bool(families)
    try:
        module = cst.parse_module(data)
    except cst.ParserSyntaxError as exc:
        message, line = _syntax_error(data, path, exc)
        return FileResult(path, "error", error=message, error_line=line)
    except (UnicodeDecodeError, LookupError, SyntaxError) as exc:
        return FileResult(path, "error", error=f"{path}:1: cannot decode: {exc}", error_line=1)
    text = data.decode(module.encoding, errors="replace")
    user_text = without_todos(text)  # facts come from the script, never from a TODO an earlier run wrote
    facts = FileFacts.from_text(user_text)
    ctx = FileContext(
        imports=ImportMap(),
        facts=facts,
        selection=options.selection,
        text=user_text,
        neuron_kernels=dict(options.neuron_kernels),
        off_rules=rules_off(families),
    )
    track_generate = ".generate(" in text
    cold: frozenset[int] = frozenset()
    if spans is not None and rules_may_apply:
        tokens = statement_tokens(families, code)
        if tokens is not None:
            cold = cold_statements(module, data, spans, tokens, prose, functions_only=track_generate)
    transformer = MigrationTransformer(ctx, track_generate=track_generate, families=families, cold=cold)
    if rules_may_apply:
        new_module = module.visit(transformer)
        assert type(new_module) is cst.Module
        new_module = transformer.close_module(new_module)
    else:  # nothing a rule could touch: only the shim import may be missing
        new_module = module
    root = ctx.frames[0]
    shim = options.shim and (facts.shim_wanted or (facts.entry_script and (root.hits or transformer.todos_added)))
    if root.hits or transformer.todos_added or shim:
        imported = add_imports(new_module, ([SHIM] if shim else []) + sorted(ctx.needed_imports))
        if imported is new_module and not (root.hits or transformer.todos_added or transformer.rewrote):
            # an entry script that already imports the shim (a confirming pass over a migrated script): no rendering
            return FileResult(path, "unchanged", todos=find_todos(text))
        new_module = imported
    elif not transformer.rewrote:  # no node replaced: the tree is the parsed one, and libcst renders it as parsed
        return FileResult(path, "unchanged", todos=find_todos(text))
    # CPython's lines are libcst's where no lone carriage return (a line break to CPython only) is in the file
    lines = spans if spans is not None and data.count(b"\r") == data.count(b"\r\n") else None
    # the statements the traversal kept are copied from the source, the rest rendered (`migrate.render`)
    new_bytes = (new_module.code if lines is None else render(new_module, module, lines, text)).encode(
        new_module.encoding
    )
    if new_bytes == data:
        return FileResult(path, "unchanged", todos=find_todos(text))
    try:
        verified = compile(new_bytes, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except Exception as exc:  # noqa: BLE001  (any failure here is our bug, not the user's)
        return FileResult(
            path,
            "internal-error",
            error=f"{path}: internal error: the migrated output does not parse ({exc}); "
            "file left unchanged, please report this",
        )
    if options.prefilter:  # without it every pass runs in full: the reference the prefilter's tests compare with
        assert isinstance(verified, ast.Module)
        leaf_only = not ctx.needed_imports and not ctx.needed_names and not transformer.todos_added and not shim
        settled = leaf_only and _settled(data, new_bytes, root.hits)
        _VERIFIED[:] = [_Verified(new_bytes, docstring_lines(verified), settled, statement_spans(verified.body))]
    del verified  # CPython's tree of a large output is not kept beside libcst's two while the report is made
    new_text = new_bytes.decode(new_module.encoding, errors="replace")
    return FileResult(
        path,
        "changed",
        new=new_bytes,
        hits=root.hits,
        rewrites=_rewrites(module, root.hits, root.sites, lines),
        todos=find_todos(new_text),
        warnings=[Finding(rule_id, message) for rule_id, message in root.warnings],
        changes=[TextChange(text, new_text)],
    )


class _Verified(NamedTuple):
    """What a pass knows of its own output, for the pass that confirms that output's fixed point."""

    new: bytes
    prose: set[int]  # its docstring lines: `compile` built CPython's tree of it to verify it
    settled: bool  # provably a fixed point already (`_settled`): the confirming pass need not parse it
    spans: tuple[Span, ...]  # where its statements are (`migrate.cold_statements`), from the same tree


# The last output a pass verified. The confirming pass over those bytes reads its docstring lines from here, so a
# token in a docstring sends no output back through libcst (as it sends no input), without a second CPython parse.
_VERIFIED: list[_Verified] = []

# Rules whose rewrite swaps the text of one string literal for another that no rule reads (NM102 `"cuda"` ->
# `"neuron"`, NM207 `"flash_attention_2"` -> `"sdpa"`): their output is nothing a hook acts on, changes no name
# a fact or a binding is read from, and keeps the line count. Library code (`config._attn_implementation ==
# "flash_attention_2"` beside `attn_implementation="flash_attention_2"`) passes the prefilter again after them.
_LEAF_RULES = frozenset({"NM102", "NM207"})


def _remembered(data: bytes) -> _Verified | None:
    """What the previous pass verified of `data`, its output; None for bytes it did not produce."""
    if _VERIFIED and _VERIFIED[0].new is data:
        return _VERIFIED.pop()
    return None


def _parsed_prose(data: bytes) -> set[int]:
    tree = cpython_tree(data, "<output>")[0]
    return docstring_lines(tree) if tree is not None else set()


def _settled(old: bytes, new: bytes, hits: Counter[str]) -> bool:
    """Whether a pass that added no import and no TODO and turned `old` into `new` with `hits` reached its fixed
    point: every rewrite a leaf swap (`_LEAF_RULES`) and no line it changed holds a token any rule acts on, so a
    second pass sees the same imports, comments and facts, and nothing new to act on. Diffusers files, whose
    rules read tokens of their own, are always confirmed."""
    if not hits or not _LEAF_RULES.issuperset(hits) or b"diffusers" in old:
        return False
    old_lines, new_lines = old.split(b"\n"), new.split(b"\n")
    if len(old_lines) != len(new_lines):
        return False
    written = b"\n".join(line for before, line in zip(old_lines, new_lines) if line != before)
    return not may_need_migration(written)


def _rewrites(
    module: cst.Module, hits: dict[str, int], sites: list[tuple[str, cst.CSTNode]], spans: tuple[Span, ...] | None
) -> list[Rewrite]:
    """Each rewrite at the line of the statement it was made in (`sites`, from the transformer's frames).

    Lines come from CPython's statements (`spans`; None where a lone carriage return, a line break to CPython but
    not to the line count of the reports, or no CPython tree leaves only a render of the parsed tree: see
    `migrate.statement_lines`). A rule that took a hit back can leave a site too many (the later lines are dropped);
    a hit made outside any statement (a module-level pass) has no line.
    """
    lines = statement_lines(module, {statement for _, statement in sites}, spans) if sites else {}
    located: dict[str, list[int | None]] = {}
    for rule_id, statement in sites:
        located.setdefault(rule_id, []).append(lines.get(statement))
    found = []
    for rule_id, count in hits.items():
        where = sorted(line for line in located.get(rule_id, ()) if line is not None)
        found += [Rewrite(rule_id, line) for line in ([*where, *[None] * count])[:count]]
    return sorted(found, key=_by_line)


def _by_line(rewrite: Rewrite) -> tuple[int, int, str]:
    return (rewrite.cell or 0, rewrite.line or 0, rewrite.rule)


def _line_map(old: str, new: str) -> Callable[[int | None], int | None]:
    """A function from a line of `new` to the line of `old` it came from (a changed line: where its change starts).

    `difflib` is imported here: only a file two passes change needs it, and a one-file run's start-up is most of its
    time (issue 39)."""
    import difflib

    opcodes = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False).get_opcodes()

    def back(line: int | None) -> int | None:
        if line is None:
            return None
        for tag, i1, _, j1, j2 in opcodes:
            if j1 < line <= j2:
                return i1 + (line - j1) if tag == "equal" else i1 + 1
        return line

    return back


def _may_want_shim(data: bytes) -> bool:
    """Whether an otherwise untouched file is an entry script that needs `import neuroncompat`."""
    return any(name in data for name in _SHIMMED) and wants_shim(data.decode("utf-8", "replace"))


def _syntax_error(data: bytes, path: str, exc: cst.ParserSyntaxError) -> tuple[str, int]:
    """`file:line:col: syntax error: ...` and the line, located by CPython's parser (libcst's points later)."""
    try:
        compile(data, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as err:
        return f"{path}:{err.lineno}:{err.offset or 1}: syntax error: {err.msg}; file skipped", err.lineno or 1
    except ValueError:
        pass
    return f"{path}:{exc.raw_line}:{exc.raw_column + 1}: syntax error: {exc.message}; file skipped", exc.raw_line
