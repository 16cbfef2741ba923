"""The default format: unified diffs on stdout, and a summary for people on stderr."""

from __future__ import annotations

import click

from migrate.report import (
    Totals,
    display_path,
    ordered,
    plural,
    rewrites_of,
    unified_diff,
    unsafe,
    unsafe_summary,
    where,
)
from migrate.results import FileResult, Rewrite
from migrate.rule_families import get_rule

_COLOURS = {"+": "green", "-": "red", "@": "cyan"}


def diffs(results: list[FileResult]) -> str:
    """Every changed file's diff, coloured with ANSI codes that `click.echo` strips off a TTY."""
    out = []
    for result in ordered(results):
        if result.status != "changed":
            continue
        for line in unified_diff(result).splitlines():
            if line.startswith(("+++", "---")):
                line = click.style(line, bold=True)
            elif line[:1] in _COLOURS:
                line = click.style(line, fg=_COLOURS[line[:1]])
            out.append(line + "\n")
    return "".join(out)


def render(results: list[FileResult], mode: str) -> str:
    """Files scanned/changed/skipped/errors; with --check or --write each file that would change
    (or changed: in diff mode the diffs name them); rewrites per rule, `(unsafe)` marking the rules whose
    rewrite can change behaviour, then how many rewrites are unsafe and each one at file:line with how it
    changes behaviour; TODOs and notes with file:line, each the line every command's text report gives a finding
    (`neuroncompat_report.text`); each file skipped for a reason other than a skip-file
    comment, and each error."""
    totals = Totals.of(results)
    verb = "changed" if mode == "write" else "would change"
    lines = [
        f"neuron-migrate: {plural(totals.files, 'file')} scanned, {totals.statuses['changed']} {verb}, "
        f"{totals.statuses['unchanged']} unchanged, {totals.statuses['skipped']} skipped, "
        f"{plural(totals.errors, 'error')}"
    ]
    results = ordered(results)
    if mode != "diff":
        lines.extend(f"  {verb}: {display_path(r.path)}" for r in results if r.status == "changed")
    if totals.rewrites:
        lines.append("rewrites per rule:")
        for rule_id, n in sorted(totals.rewrites.items()):
            rule = get_rule(rule_id)
            lines.append(f"  {rule_id} {rule.name if rule else '?'}: {n}" + (" (unsafe)" if unsafe(rule_id) else ""))
    risky = unsafe_summary(results)
    if risky:
        lines.append(risky)
        for r in results:
            for rewrite in rewrites_of(r):
                rule = get_rule(rewrite.rule)
                if rule is not None and unsafe(rule.id):
                    lines.append(f"  unsafe: {_location(r, rewrite)}: {rule.id} {rule.name}: {rule.safety_reason}")
    if totals.todos:
        lines.append(f"TODOs needing manual work ({totals.todos}):")
    if totals.todos or any(r.warnings for r in results):
        lines.extend(_findings(results))
    for r in results:
        if r.status == "skipped":
            lines.append(f"  skipped: {display_path(r.path)}: {r.skip_reason or 'neuron-migrate: skip-file comment'}")
    for r in results:
        if r.error:
            lines.append(f"  error: {r.error}")
    return "\n".join(lines) + "\n"


def _findings(results: list[FileResult]) -> list[str]:
    """Each TODO (`warning`) and note as every command's text report gives a finding.

    Imported here: a run without TODOs or notes, such as a pre-commit check of one file, does not load the report
    model (tests/migrate/test_startup_imports.py)."""
    from migrate.formats.notes import note
    from neuroncompat_report import text

    todos = [note("warning", display_path(r.path), todo) for r in results for todo in r.todos]
    notes = [note("note", display_path(r.path), item) for r in results for item in r.warnings]
    return [f"  {text.line(finding)}" for finding in todos + notes]


def _location(result: FileResult, finding: Rewrite) -> str:
    if finding.cell is None:
        return display_path(result.path) + (f":{finding.line}" if finding.line is not None else "")
    return f"{display_path(result.path)} ({where(finding)})"
