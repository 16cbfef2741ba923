"""`--format json`: one document per run, its schema published as `docs/migrate.schema.json` (generated from
`migrate.formats.json_types`).

The schema is versioned (`schema_version`); fields are only ever added within a version.
"""

from __future__ import annotations

import json
from importlib import metadata

from migrate.report import Totals, display_path, ordered, unified_diff
from migrate.results import FileResult, Finding
from migrate.rule_families import get_rule

SCHEMA_VERSION = 1


def tool_version() -> str:
    """The installed distribution's version (not `neuroncompat.__version__`: importing it applies the shim)."""
    try:
        return metadata.version("neuroncompat")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def _safety(rule_id: str) -> tuple[str | None, str | None]:
    """The rule's fix safety and, when unsafe, why; (None, None) for a pseudo-rule such as `parse-error`."""
    rule = get_rule(rule_id)
    if rule is None:
        return None, None
    return rule.safety, rule.safety_reason or None


def _finding(finding: Finding) -> dict:
    safety, reason = _safety(finding.rule)
    return {
        "rule": finding.rule,
        "message": finding.message,
        "line": finding.line,
        "cell": finding.cell,
        "safety": safety,
        "safety_reason": reason,
    }


def _rules(results: list[FileResult]) -> dict:
    """The fix safety of every rule this run reports (rewrites, TODOs, notes), keyed by id in id order."""
    ids = {rule_id for r in results for rule_id in r.hits} | {f.rule for r in results for f in (*r.todos, *r.warnings)}
    out = {}
    for rule_id in sorted(ids):
        safety, reason = _safety(rule_id)
        if safety is not None:
            out[rule_id] = {"safety": safety, "safety_reason": reason}
    return out


def render(results: list[FileResult], mode: str) -> str:
    totals = Totals.of(results)
    files = [
        {
            "path": display_path(r.path),
            "kind": r.kind,
            "status": r.status,
            "written": mode == "write" and r.status == "changed",
            "rewrites": dict(sorted(r.hits.items())),
            "todos": [_finding(t) for t in r.todos],
            "warnings": [_finding(w) for w in r.warnings],
            "error": r.error,
            "error_line": r.error_line,
            "skip_reason": r.skip_reason,
            "diff": unified_diff(r) if r.status == "changed" else "",
        }
        for r in ordered(results)
    ]
    document = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "neuron-migrate", "version": tool_version()},
        "mode": mode,
        "summary": {
            "files": totals.files,
            "changed": totals.statuses["changed"],
            "unchanged": totals.statuses["unchanged"],
            "skipped": totals.statuses["skipped"],
            "errors": totals.errors,
            "todos": totals.todos,
            "rewrites": dict(sorted(totals.rewrites.items())),
        },
        "files": files,
        "rules": _rules(results),
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
