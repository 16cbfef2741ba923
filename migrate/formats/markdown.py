"""`--format markdown`: a pull-request comment.

A summary line, how many rewrites can change behaviour (unsafe fixes, with their rule ids), and a table
of the files that need attention (changed, TODOs, errors), then per file the rules applied with their
lines (each unsafe one marked, with how it changes behaviour), the TODOs and notes (each as every command's
markdown gives a finding, `neuroncompat_report.markdown`) and a collapsible diff. The first line is a hidden
marker so a CI job can find and update its previous comment instead of adding one per push. GitHub rejects
comments over 65,536 characters, so diffs that would pass `BUDGET` are left out with a note.
"""

from __future__ import annotations

import re

from migrate.formats.notes import note
from migrate.report import (
    Totals,
    display_path,
    ordered,
    plural,
    rewrites_of,
    rewrites_text,
    status_text,
    unified_diff,
    unsafe_summary,
    where,
)
from migrate.results import FileResult
from migrate.rule_families import get_rule
from neuroncompat_report import markdown

MARKER = "<!-- neuron-migrate report -->"
BUDGET = 60_000


def _code(text: str) -> str:
    """Inline code that survives backticks inside `text`."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {text} {fence}" if longest else f"`{text}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _fenced(text: str, language: str) -> str:
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{language}\n{text}{fence}\n"


def render(results: list[FileResult], mode: str) -> str:
    totals = Totals.of(results)
    verb = "changed" if mode == "write" else "would change"
    out = [
        MARKER + "\n",
        "## neuron-migrate\n\n",
        f"**{plural(totals.files, 'file')} scanned:** {totals.statuses['changed']} {verb}, "
        f"{totals.statuses['unchanged']} unchanged, {totals.statuses['skipped']} skipped, "
        f"{plural(totals.errors, 'error')}, {plural(totals.todos, 'TODO')}\n",
    ]
    risky = unsafe_summary(results)
    if risky:
        out.append(f"\n:warning: **{risky}**: each is marked **unsafe** below, with how it changes behaviour.\n")
    shown = [r for r in ordered(results) if r.status == "changed" or r.todos or r.error or r.warnings]
    if not shown:
        out.append("\nNothing to migrate.\n")
        return "".join(out)
    out.append("\n| file | kind | status | rewrites | TODOs |\n|---|---|---|---|---|\n")
    for r in shown:
        out.append(
            f"| {_cell(_code(display_path(r.path)))} | {r.kind} | {status_text(r, mode)} | "
            f"{_cell(rewrites_text(r.hits)) or '–'} | {len(r.todos)} |\n"
        )
    sections = [_section(r, mode) for r in shown]
    size = sum(map(len, out)) + sum(len(head) for head, _ in sections)
    for head, diff in sections:
        out.append(head)
        if diff:
            if size + len(diff) <= BUDGET:
                out.append(diff)
                size += len(diff)
            else:
                out.append(
                    "\n_Diff left out: the comment would pass GitHub's size limit; run "
                    "`neuron-migrate` on this file to see it._\n"
                )
    return "".join(out)


def _section(result: FileResult, mode: str) -> tuple[str, str]:
    """The file's heading, rules, TODOs, notes and error; and its collapsible diff."""
    out = [f"\n### {_code(display_path(result.path))}\n"]
    if result.error:
        out.append(f"\n**Error:** {_code(result.error)}\n")
    if result.hits:
        out.append(f"\n**Rules applied** ({status_text(result, mode)}):\n\n")
        places: dict[str, list[str]] = {}
        for rewrite in rewrites_of(result):
            place = where(rewrite)
            if place and place not in places.setdefault(rewrite.rule, []):
                places[rewrite.rule].append(place)
        for rule_id, n in sorted(result.hits.items()):
            rule = get_rule(rule_id)
            name = f" {_code(rule.name)}" if rule else ""
            at = f" ({'; '.join(places[rule_id])})" if places.get(rule_id) else ""
            risk = f" **unsafe:** {rule.safety_reason}" if rule and rule.safety == "unsafe" else ""
            out.append(f"- **{rule_id}**{name} ×{n}{at}: {rule.summary if rule else ''}{risk}\n")
    path = display_path(result.path)
    if result.todos:
        out.append("\n**TODOs** (manual work):\n\n")
        out.extend(f"- {markdown.line(note('warning', path, todo))}\n" for todo in result.todos)
    if result.warnings:
        out.append("\n**Notes:**\n\n")
        out.extend(f"- {markdown.line(note('note', path, item))}\n" for item in result.warnings)
    diff = ""
    if result.status == "changed":
        diff = f"\n<details><summary>Diff</summary>\n\n{_fenced(unified_diff(result), 'diff')}\n</details>\n"
    return "".join(out), diff
