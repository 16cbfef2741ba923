"""What the user sees: unified diffs (stdout), the end-of-run summary (stderr), or JSON.

Diffs are plain text that `git apply`/`patch -p1` accept (`a/` and `b/` prefixes), never run
through a markup renderer, so what is shown is exactly what `--write` produces.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from collections.abc import Iterable

from migrate.engine import FileResult
from migrate.registry import get_rule


def unified_diff(result: FileResult) -> str:
    """The diff of one changed file, with normalised `\\n` line endings for display."""
    old = result.old_text.splitlines(keepends=True)
    new = result.new_text.splitlines(keepends=True)
    path = result.path.lstrip("./") if not result.path.startswith("/") else result.path.lstrip("/")
    lines = difflib.unified_diff(old, new, fromfile=f"a/{path}", tofile=f"b/{path}")
    out = []
    for line in lines:
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        out.append(line.replace("\r\n", "\n"))
    return "".join(out)


def summary(results: list[FileResult], write: bool) -> str:
    """Files scanned/changed/skipped/errors, rewrites per rule, TODOs with file:line."""
    counts = Counter(r.status for r in results)
    hits: Counter[str] = Counter()
    for r in results:
        hits.update(r.hits)
    verb = "changed" if write else "would change"
    lines = [
        f"neuron-migrate: {len(results)} files scanned, {counts['changed']} {verb}, "
        f"{counts['unchanged']} unchanged, {counts['skipped']} skipped (skip-file), "
        f"{counts['error'] + counts['internal-error']} errors"
    ]
    if hits:
        lines.append("rewrites per rule:")
        for rule_id, n in sorted(hits.items()):
            rule = get_rule(rule_id)
            lines.append(f"  {rule_id} {rule.name if rule else '?'}: {n}")
    todos = [(r.path, line, rule_id, text) for r in results for line, rule_id, text in r.todos]
    if todos:
        lines.append(f"TODOs needing manual work ({len(todos)}):")
        for path, line, rule_id, text in todos:
            lines.append(f"  warning: {path}:{line}: {rule_id} {text}")
    warnings = [(r.path, rule_id, text) for r in results for rule_id, text in r.warnings]
    for path, rule_id, text in warnings:
        lines.append(f"  warning: {path}: {rule_id} {text}")
    for r in results:
        if r.error:
            lines.append(f"  error: {r.error}")
    return "\n".join(lines) + "\n"


def as_json(results: Iterable[FileResult], write: bool) -> str:
    """One record per file: status, rewrites per rule, TODOs, warnings, error, diff."""
    records = []
    for r in results:
        records.append({
            "path": r.path,
            "status": r.status,
            "written": bool(write and r.status == "changed"),
            "rewrites": dict(sorted(r.hits.items())),
            "todos": [{"line": line, "rule": rule_id, "message": text} for line, rule_id, text in r.todos],
            "warnings": [{"rule": rule_id, "message": text} for rule_id, text in r.warnings],
            "error": r.error,
            "diff": unified_diff(r) if r.status == "changed" else "",
        })
    return json.dumps({"files": records}, indent=2) + "\n"
