"""neuron-migrate's results as the shared report model's findings (`neuroncompat_report.model`).

The SARIF and GitHub formats render these with the renderers every command shares. Per file, in path order:
its error, each rewrite at its line (an `error` under `--check`, else a `note`; the fix carries the rule's
safety), each TODO (`warning`) and each note (`note`). A notebook's finding has no line (cell lines are not lines
of the JSON file): a rewrite's message names its cell, a TODO's or note's region (`migrate.formats.notes`).
"""

from __future__ import annotations

from migrate.docs import explain
from migrate.formats.json import tool_version
from migrate.formats.notes import TOOL, note
from migrate.formats.rewrites import rewrite_message
from migrate.report import Totals, display_path, ordered, rewrites_of
from migrate.results import FileResult
from migrate.rule_families import get_rule
from neuroncompat_report.model import Finding, Fix, RuleInfo, Run

# results that are not about one registered rule
PSEUDO_RULES = {
    "parse-error": "The file (or notebook cell) could not be parsed and was left unchanged.",
    "internal-error": "neuron-migrate failed on this file and left it unchanged; please report it.",
}


def findings(results: list[FileResult], mode: str) -> list[Finding]:
    out = []
    for r in ordered(results):
        path = display_path(r.path)
        if r.error:
            rule_id = "internal-error" if r.status == "internal-error" else "parse-error"
            out.append(Finding(TOOL, rule_id, "error", path, r.error_line, r.error, title=f"{TOOL} {r.status}"))
        for rewrite in rewrites_of(r):
            rule = get_rule(rewrite.rule)
            out.append(
                Finding(
                    TOOL,
                    rewrite.rule,
                    "error" if mode == "check" else "note",
                    path,
                    rewrite.line if rewrite.cell is None else None,
                    rewrite_message(rewrite, mode),
                    fix=Fix(rule.safety, rule.safety_reason) if rule else None,
                )
            )
        out.extend(note("warning", path, todo) for todo in r.todos)
        out.extend(note("note", path, item) for item in r.warnings)
    return out


def rule_info(rule_id: str) -> RuleInfo:
    """What the renderers say about a rule: the registry's entry, or a pseudo-rule's one line."""
    rule = get_rule(rule_id)
    if rule is None:
        return RuleInfo(rule_id, rule_id, PSEUDO_RULES.get(rule_id, rule_id))
    return RuleInfo(
        rule.id,
        rule.name,
        rule.summary,
        rule.rationale,
        explain(rule),
        "warning" if rule.todo else "note",
        rule.safety,
        rule.safety_reason,
    )


def run(results: list[FileResult], mode: str) -> Run:
    """The whole run: what it read, its counts and verdict, its findings and the rules they cite (neuron-migrate
    does not time itself: `seconds` stays None)."""
    found = tuple(findings(results, mode))
    totals = Totals.of(results)
    counts = {status: totals.statuses[status] for status in ("changed", "unchanged", "skipped")}
    counts.update(files=totals.files, errors=totals.errors, todos=totals.todos, rewrites=sum(totals.rewrites.values()))
    verdict = "errors" if totals.errors else "changes needed" if counts["changed"] else "nothing to do"
    return Run(
        TOOL,
        tool_version(),
        inputs=tuple(display_path(r.path) for r in ordered(results)),
        counts=counts,
        verdict=verdict,
        findings=found,
        rules={f.rule: rule_info(f.rule) for f in found},
    )
