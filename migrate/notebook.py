"""Migrate a Jupyter notebook: its code cells, in place, leaving every other byte as it was.

- The Python cells are migrated together, as one module (imports in cell 1 resolve names in
  cell 5), by the same engine as `.py` files. IPython line magics (`!cmd`, `%pip ...`,
  `x = !cmd`) are masked with placeholder statements while libcst parses, then put back; `!` and
  `%` shell magics go through the shell rules (`!pip install flash-attn` loses the CUDA-only
  package, `!nvidia-smi` becomes `!neuron-ls`, `!optimum-cli export neuron` gets a TODO).
- `%%bash`/`%%sh` cells are shell scripts; `%%writefile name.py|.yaml|.sh` cells are migrated
  as the file they write; cells under other cell magics (`%%html`, ...) are left alone.
- A cell that does not parse on its own is left untouched and named in the report.
- Only changed cells' `source` values are rewritten, spliced into the original JSON text in
  its own layout (list of lines or one string, same indentation), so outputs, metadata,
  execution counts and untouched cells stay byte-identical. The new text must load as JSON
  with exactly the intended sources before it is accepted.

Cells are numbered from 1 over all cells (markdown too), as a reader counts them; a TODO's
line counts within its cell.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from pathlib import PurePosixPath

from migrate.configs.edits import Changes
from migrate.configs.shell_rules import migrate_shell, shell_rules
from migrate.configs.yaml_rules import migrate_yaml
from migrate.discover import SUFFIXES
from migrate.engine import migrate_source
from migrate.markers import SKIP_FILE
from migrate.options import Options
from migrate.results import FileResult, Finding, TextChange, find_todos

_CELL_MARK = "_neuron_migrate_cell_{}_"
_CELL_SPLIT = re.compile(r"^_neuron_migrate_cell_(\d+)_\n", re.M)
_MAGIC = "_neuron_migrate_magic_{}_"
_TODO_TAG = re.compile(r"#\s*TODO\(neuron-migrate (NM\d+)\)")
_MAGIC_LINE = re.compile(r"^([ \t]*)_neuron_migrate_magic_(\d+)_$", re.M)
_SHELL_MAGIC = re.compile(r"[ \t]*(?:!|%(?=(?:pip|conda|env)\b))")
_OTHER_MAGIC = re.compile(r"[ \t]*(?:%|\w+\s*=\s*[!%])")
_PYTHON_CELL_MAGICS = frozenset({"capture", "time", "timeit", "prun"})
_SHELL_CELL_MAGICS = frozenset({"bash", "sh", "script bash", "script sh"})
_WS = re.compile(r"[ \t\n\r]*")


def _skip_blanks(text: str, i: int) -> int:
    """The index of the first non-blank character at or after ``i`` (``_WS`` matches anywhere)."""
    match = _WS.match(text, i)
    assert match is not None  # `*`: the empty match at worst
    return match.end()


class _BadNotebook(ValueError):
    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


def migrate_notebook(data: bytes, path: str, options: Options) -> FileResult:
    """Migrate one `.ipynb` file."""
    if SKIP_FILE.search(data):
        return FileResult(path, "skipped", kind="notebook")
    try:
        text = data.decode("utf-8")
        sources = _sources(text)
    except UnicodeDecodeError as exc:
        return FileResult(
            path,
            "error",
            error=f"{path}: cannot decode as UTF-8 ({exc.reason}); file skipped",
            error_line=1,
            kind="notebook",
        )
    except _BadNotebook as exc:
        return FileResult(
            path, "error", error=f"{path}:{exc.line}: {exc}; file skipped", error_line=exc.line, kind="notebook"
        )
    new_sources, hits, warnings = _migrate_cells(sources, path, options)
    todos = [t for number, src in sorted(new_sources.items()) for t in find_todos(src, cell=number)]
    changed = {n: src for n, src in new_sources.items() if src != sources[n][0]}
    if not changed:
        return FileResult(path, "unchanged", todos=todos, warnings=warnings, kind="notebook")
    new_text = _splice(text, sources, changed)
    problem = _verify(new_text, changed)
    if problem:
        return FileResult(
            path,
            "internal-error",
            kind="notebook",
            error=f"{path}: internal error: {problem}; file left unchanged, please report this",
        )
    return FileResult(
        path,
        "changed",
        new=new_text.encode("utf-8"),
        hits=hits,
        todos=todos,
        warnings=warnings,
        changes=[TextChange(sources[n][0], changed[n], cell=n) for n in sorted(changed)],
        kind="notebook",
    )


def _sources(text: str) -> dict[int, tuple[str, int, int]]:
    """Cell number -> (source text, span of its JSON value) for every code cell."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _BadNotebook(f"not valid JSON: {exc.msg}", exc.lineno) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
        raise _BadNotebook('not a notebook (no top-level "cells" list)', 1)
    found: dict[int, tuple[str, int, int]] = {}
    for number, (cell, members) in enumerate(zip(doc["cells"], _cell_members(text)), start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code" or "source" not in members:
            continue
        source = cell["source"]
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise _BadNotebook(
                f'cell {number}: "source" is neither a string nor a list of strings',
                text.count("\n", 0, members["source"][0]) + 1,
            )
        found[number] = (source, *members["source"])
    return found


def _members(text: str, i: int) -> tuple[dict[str, tuple[int, int]], int]:
    """The value spans of the JSON object starting at `text[i]` (`{`), and the index after it."""
    decoder = json.JSONDecoder()
    spans: dict[str, tuple[int, int]] = {}
    i = _skip_blanks(text, i + 1)
    while text[i] != "}":
        key, i = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]  # public, not in typeshed
        i = _skip_blanks(text, _skip_blanks(text, i) + 1)  # past the colon
        _, end = decoder.raw_decode(text, i)
        spans[key] = (i, end)
        i = _skip_blanks(text, end)
        if text[i] == ",":
            i = _skip_blanks(text, i + 1)
    return spans, i + 1


def _cell_members(text: str) -> list[dict[str, tuple[int, int]]]:
    """For each cell of the (already validated) notebook, its members' value spans."""
    top, _ = _members(text, _skip_blanks(text, 0))
    start, _ = top["cells"]
    return [_members(text, item)[0] if text[item] == "{" else {} for item, _ in _items(text, start)]


def _items(text: str, i: int) -> list[tuple[int, int]]:
    """The spans of the items of the JSON array starting at `text[i]` (`[`)."""
    decoder = json.JSONDecoder()
    spans = []
    i = _skip_blanks(text, i + 1)
    while text[i] != "]":
        _, end = decoder.raw_decode(text, i)
        spans.append((i, end))
        i = _skip_blanks(text, end)
        if text[i] == ",":
            i = _skip_blanks(text, i + 1)
    return spans


def _migrate_cells(
    sources: dict[int, tuple[str, int, int]], path: str, options: Options
) -> tuple[dict[int, str], Counter[str], list[Finding]]:
    new: dict[int, str] = {}
    hits: Counter[str] = Counter()
    warnings: list[Finding] = []
    python: dict[int, tuple[str, list[str]]] = {}  # cell -> (masked source, magic lines)
    for number, (source, _, _) in sources.items():
        first, _, body = source.partition("\n")
        magic = first[2:].strip() if first.startswith("%%") else None
        if magic in _SHELL_CELL_MAGICS:
            changes = Changes(source, options.selection)
            shell_rules(changes, view=" " * len(first) + source[len(first) :])
            new[number] = changes.apply()
            hits.update(changes.hits)
            warnings.extend(f._replace(cell=number) for f in changes.notes)
        elif magic is not None and magic.startswith("writefile ") and (written := _written_kind(magic)) is not None:
            result = _WRITTEN[written](body.encode("utf-8"), magic.split()[-1], options)
            new[number] = first + "\n" + result.new.decode("utf-8") if result.new is not None else source
            hits.update(result.hits)
            warnings.extend(f._replace(cell=number) for f in result.warnings)
        elif magic is None or magic.split()[0] in _PYTHON_CELL_MAGICS:
            masked, magics = _mask(source)
            try:
                ast.parse(masked)
            except SyntaxError as exc:
                warnings.append(
                    Finding(
                        "parse-error",
                        f"cell {number} left unchanged: syntax error at line {exc.lineno}: {exc.msg}",
                        exc.lineno,
                        number,
                    )
                )
                new[number] = source
                continue
            python[number] = (masked, magics)
        else:
            new[number] = source
    if python:
        migrated = _migrate_python(python, path, options, hits, warnings)
        for number, (_masked, magics) in python.items():
            new[number] = _unmask(migrated[number], magics, options, hits, warnings, number)
    return new, hits, warnings


# The migrator for each kind of file a `%%writefile` cell can write (every kind but a notebook); named here
# rather than through `migrate.dispatch`, which routes notebooks to this module.
_WRITTEN = {"python": migrate_source, "yaml": migrate_yaml, "shell": migrate_shell}


def _written_kind(magic: str) -> str | None:
    """The kind of file a `%%writefile [-a] name` cell writes, when it is one we migrate."""
    suffix = PurePosixPath(magic.split()[-1]).suffix.lower()
    return SUFFIXES[suffix] if suffix in SUFFIXES and SUFFIXES[suffix] != "notebook" else None


def _mask(source: str) -> tuple[str, list[str]]:
    """Replace IPython magic lines with placeholder statements libcst can parse."""
    magics: list[str] = []
    lines = source.split("\n")
    for i, line in enumerate(lines):
        if _SHELL_MAGIC.match(line) or _OTHER_MAGIC.match(line):
            indent = line[: len(line) - len(line.lstrip())]
            lines[i] = indent + _MAGIC.format(len(magics))
            magics.append(line)
    return "\n".join(lines), magics


def _migrate_python(
    python: dict[int, tuple[str, list[str]]],
    path: str,
    options: Options,
    hits: Counter[str],
    warnings: list[Finding],
) -> dict[int, str]:
    """Migrate the masked Python cells as one module; return each cell's migrated (masked) text."""
    module = "".join(
        _CELL_MARK.format(number) + "\n" + masked + ("" if masked.endswith("\n") else "\n")
        for number, (masked, _) in python.items()
    )
    result = migrate_source(module.encode("utf-8"), path, options)
    if result.status != "changed":
        return {number: masked for number, (masked, _) in python.items()}
    hits.update(result.hits)
    warnings.extend(result.warnings)
    text = result.changes[0].new
    pieces = _CELL_SPLIT.split(text)
    header, rest = pieces[0], pieces[1:]
    out = {}
    for number_text, body in zip(rest[::2], rest[1::2]):
        number = int(number_text)
        if not python[number][0].endswith("\n") and body.endswith("\n"):
            body = body[:-1]
        out[number] = body
    out[_import_cell(python)] = header + out[_import_cell(python)]
    return out


def _import_cell(python: dict[int, tuple[str, list[str]]]) -> int:
    """Where imports added by the migration go: the first cell that imports, else the first with code.

    Not simply the first cell: notebooks open with `!pip install` cells, and an import placed
    there would run before the packages are installed.
    """
    for wanted in (re.compile(r"^(?:import|from)\s", re.M), re.compile(r"^(?!_neuron_migrate_magic_)\S", re.M)):
        for number, (masked, _) in python.items():
            if wanted.search(masked):
                return number
    return next(iter(python))


def _unmask(
    text: str, magics: list[str], options: Options, hits: Counter[str], warnings: list[Finding], number: int
) -> str:
    """Put the magic lines back, shell magics migrated by the shell rules."""

    def restore(match: re.Match[str]) -> str:
        line = magics[int(match.group(2))]
        shell = _SHELL_MAGIC.match(line)
        if shell is None:
            return line
        changes = Changes(line, options.selection)
        shell_rules(changes, view=" " * shell.end() + line[shell.end() :])
        new = _without_repeated_todos(changes.apply(), _tags_above(text, match.start()))
        hits.update(changes.hits)
        warnings.extend(f._replace(cell=number) for f in changes.notes)
        return new

    return _MAGIC_LINE.sub(restore, text)


def _tags_above(text: str, start: int) -> set[str]:
    """TODO tags in the comment lines directly above offset `start` of the cell's text.

    The shell rules see one magic line at a time, so they cannot tell that the TODO they want
    is already the line above it (written by an earlier run); this is how a rerun knows.
    """
    tags = set()
    for line in reversed(text[:start].split("\n")[:-1]):
        if not line.lstrip().startswith("#"):
            break
        match = _TODO_TAG.search(line)
        if match:
            tags.add(match.group(1))
    return tags


def _without_repeated_todos(new: str, present: set[str]) -> str:
    """Drop the TODO lines the shell rules put above a magic when the cell already has them."""
    if not present:
        return new
    lines = new.split("\n")
    kept = [line for line in lines if not ((m := _TODO_TAG.match(line.strip())) and m.group(1) in present)]
    return "\n".join(kept)


def _splice(text: str, sources: dict[int, tuple[str, int, int]], changed: dict[int, str]) -> str:
    """The notebook text with each changed cell's `source` value re-encoded in its own layout."""
    ascii_only = "\\u" in text and text.isascii()
    out, position = [], 0
    for number in sorted(changed):
        _, start, end = sources[number]
        out.append(text[position:start])
        out.append(_encode(text[start:end], changed[number], ascii_only))
        position = end
    out.append(text[position:])
    return "".join(out)


def _encode(old: str, source: str, ascii_only: bool) -> str:
    """`source` as a JSON value shaped like `old`: one string, or a list of lines laid out alike."""
    if not old.startswith("["):
        return json.dumps(source, ensure_ascii=ascii_only)
    items = _items(old, 0)
    lines = [json.dumps(line, ensure_ascii=ascii_only) for line in source.splitlines(keepends=True)]
    if not items:
        return "[" + ", ".join(lines) + "]"
    opening, closing = old[1 : items[0][0]], old[items[-1][1] : -1]
    separator = old[items[0][1] : items[1][0]] if len(items) > 1 else "," + (opening or " ")
    return "[" + opening + separator.join(lines) + closing + "]"


def _verify(new_text: str, changed: dict[int, str]) -> str | None:
    """None when the new notebook loads as JSON, holds exactly the intended sources, and its Python cells parse."""
    try:
        cells = json.loads(new_text)["cells"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        return f"the migrated notebook is not valid JSON ({exc})"
    for number, source in changed.items():
        got = cells[number - 1]["source"]
        if ("".join(got) if isinstance(got, list) else got) != source:
            return f"cell {number} did not round-trip"
        magic = source[2:].split("\n")[0].strip() if source.startswith("%%") else None
        if magic is None or magic.split()[0] in _PYTHON_CELL_MAGICS:
            try:
                ast.parse(_mask(source)[0])
            except SyntaxError as exc:
                return f"the migrated cell {number} does not parse ({exc.msg}, line {exc.lineno})"
    return None
