"""Read a UTF-8 config or script, and turn a `Changes` into the `FileResult` the report shows.

YAML and shell files carry no encoding cookie: they are UTF-8, with or without a BOM. The
BOM and the line endings are kept (edits are spliced into the decoded text, which still holds
the `\\r\\n`s). The caller's `check` re-parses the new text; output that does not parse is
never returned as a change, whatever a rule did.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from migrate.configs.edits import Changes
from migrate.markers import SKIP_FILE
from migrate.options import Options
from migrate.results import FileResult, TextChange, find_todos


class Undecodable(ValueError):
    """The file is not UTF-8; its message is the report line, `line` where decoding failed."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


def decode(data: bytes, path: str) -> str:
    """The text of `data`; a BOM stays as the first character, so encoding restores it."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise Undecodable(f"{path}:{line}: cannot decode as UTF-8 ({exc.reason}); file skipped", line) from None


def migrate_text(
    data: bytes,
    path: str,
    kind: str,
    options: Options,
    rules: Callable[[Changes], None],
    check: Callable[[str], str | None],
) -> FileResult:
    """Run `rules` over the file's text and return the verified result.

    `check(text)` returns None when `text` parses, else a description of the problem naming its line
    (`line N`); it is also asked about the original when the output does not parse, so a file that was
    already broken is reported as the user's error (file:line, skipped, never written), not ours.
    """
    if SKIP_FILE.search(data):
        return FileResult(path, "skipped", kind=kind)
    try:
        text = decode(data, path)
    except Undecodable as exc:
        return FileResult(path, "error", error=str(exc), error_line=exc.line, kind=kind)
    changes = Changes(text, options.selection)
    rules(changes)
    new_text = changes.apply()
    if new_text == text:
        return FileResult(path, "unchanged", todos=find_todos(text), kind=kind)
    problem = check(new_text)
    if problem is not None:
        before = check(text)
        if before is not None:  # the user's file was broken already: skipped, as a Python file would be
            line = int(found.group(1)) if (found := re.search(r"\bline (\d+)", before)) else 1
            return FileResult(path, "error", error=f"{path}:{line}: {before}; file skipped", error_line=line, kind=kind)
        return FileResult(
            path,
            "internal-error",
            error=f"{path}: internal error: the migrated output does not parse ({problem}); "
            "file left unchanged, please report this",
            kind=kind,
        )
    return FileResult(
        path,
        "changed",
        new=new_text.encode("utf-8"),
        hits=changes.hits,
        rewrites=changes.rewrites,
        todos=find_todos(new_text),
        warnings=changes.notes,
        changes=[TextChange(text, new_text)],
        kind=kind,
    )
