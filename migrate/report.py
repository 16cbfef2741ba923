"""What every report format shares: file order, display paths, counts, fix safety, and the diff itself.

Diffs are plain text that `git apply`/`patch -p1` accept (`a/` and `b/` prefixes), never run
through a markup renderer, so what is shown is exactly what `--write` produces. A notebook's
diff compares cell sources, one hunk header per cell (`@@ -1,3 +1,4 @@ cell 3`), because a
diff of the raw JSON is unreadable. The formats themselves live in `migrate.formats`.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from migrate.results import FileResult, Finding, Rewrite
from migrate.rule_families import get_rule

ERRORS = ("error", "internal-error")


def display_path(path: str) -> str:
    """The path as a reviewer reads it: relative to the working directory when inside it, `/`-separated."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return absolute.as_posix()


def plural(count: int, noun: str) -> str:
    """`1 file`, `2 files`, `1 error`, `0 errors`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def ordered(results: list[FileResult]) -> list[FileResult]:
    """Results by display path, so every format lists files in the same, stable order."""
    return sorted(results, key=lambda r: display_path(r.path))


def status_text(result: FileResult, mode: str) -> str:
    """`would change` / `changed` / `unchanged` / `skipped` / `error`."""
    if result.status == "changed":
        return "changed" if mode == "write" else "would change"
    return "error" if result.status in ERRORS else result.status


def where(finding: Finding | Rewrite) -> str:
    """`line 4`, `cell 3, line 2`, `cell 3` or `` for a finding's location."""
    parts = [f"cell {finding.cell}"] if finding.cell is not None else []
    if finding.line is not None:
        parts.append(f"line {finding.line}")
    return ", ".join(parts)


def unified_diff(result: FileResult) -> str:
    """The diff of one changed file, with normalised `\\n` line endings for display."""
    import difflib  # here, not at the top: a `--check` prints no diff, and a one-file run is mostly start-up

    path = display_path(result.path).lstrip("/")  # as git writes an absolute path: a/abs/x.py, not a//abs/x.py
    out = [f"--- a/{path}\n", f"+++ b/{path}\n"]
    for change in result.changes:
        old = change.old.splitlines(keepends=True)
        new = change.new.splitlines(keepends=True)
        for line in list(difflib.unified_diff(old, new))[2:]:
            if line.startswith("@@") and change.cell is not None:
                line = f"{line.rstrip()} cell {change.cell}\n"
            if not line.endswith("\n"):
                line += "\n\\ No newline at end of file\n"
            out.append(line.replace("\r\n", "\n"))
    return "".join(out)


def first_changed_line(result: FileResult) -> int | None:
    """The first line (of the file, or of the first changed cell) that the migration changes."""
    if not result.changes:
        return None
    import difflib  # only for a rewrite without a line of its own (see `unified_diff`)

    change = result.changes[0]
    matcher = difflib.SequenceMatcher(None, change.old.splitlines(), change.new.splitlines(), autojunk=False)
    for tag, i1, _, _, _ in matcher.get_opcodes():
        if tag != "equal":
            return i1 + 1
    return 1


@dataclass
class Totals:
    """The counts the summaries print."""

    files: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    rewrites: Counter[str] = field(default_factory=Counter)
    todos: int = 0

    @classmethod
    def of(cls, results: list[FileResult]) -> Totals:
        totals = cls(files=len(results))
        for r in results:
            totals.statuses[r.status] += 1
            totals.rewrites.update(r.hits)
            totals.todos += len(r.todos)
        return totals

    @property
    def errors(self) -> int:
        return sum(self.statuses[s] for s in ERRORS)


def rewrites_text(hits: Counter[str]) -> str:
    """`NM101 ×2, NM104 ×1` in id order."""
    return ", ".join(f"{rule} ×{n}" for rule, n in sorted(hits.items()))


def unsafe(rule_id: str) -> bool:
    """Whether the rule's rewrite can change what the script does (its fix safety, as in ruff)."""
    rule = get_rule(rule_id)
    return rule is not None and rule.safety == "unsafe"


def rewrites_of(result: FileResult) -> list[Rewrite]:
    """One entry per rewrite of a changed file, in line order: where the engine located it, else (a notebook, a
    config, a module-level pass) at the file's first change, or its first changed cell."""
    if result.status != "changed":
        return []
    located = Counter(r.rule for r in result.rewrites)
    unlocated = [rule_id for rule_id, n in result.hits.items() for _ in range(n - located[rule_id])]
    if not unlocated:  # the diff behind `first_changed_line` is quadratic in a file of many equal lines (50,000: hours)
        return sorted(result.rewrites, key=lambda r: (r.cell or 0, r.line or 0, r.rule))
    cell = result.changes[0].cell if result.changes else None
    first = None if cell is not None else first_changed_line(result)
    rest = [Rewrite(rule_id, first, cell) for rule_id in unlocated]
    return sorted([*result.rewrites, *rest], key=lambda r: (r.cell or 0, r.line or 0, r.rule))


def unsafe_summary(results: list[FileResult]) -> str | None:
    """`6 of 9 rewrites change behaviour: review them (NM202, NM205, ...)`, or None when every rewrite is safe."""
    rewrites = [rewrite for r in results for rewrite in rewrites_of(r)]
    risky = sorted({r.rule for r in rewrites if unsafe(r.rule)})
    if not risky:
        return None
    count = sum(1 for r in rewrites if unsafe(r.rule))
    return f"{count} of {plural(len(rewrites), 'rewrite')} change behaviour: review them ({', '.join(risky)})"
