"""`--format sarif`: SARIF 2.1.0 for code scanning (e.g. github/codeql-action/upload-sarif).

Results: each TODO (`warning`), each rewrite under its own rule id at the line of its statement
(`error` under `--check`, else `note`; a notebook's in the cell the message names, a config file's at its
first change), each parse error (`error`) and each note (`note`).
`tool.driver.rules` lists only the rules the results use, in id order, so the output does not
change when unrelated rules are added. Notebook results name the cell in the message and carry
no region (cell lines are not lines of the JSON file). Fix safety rides in property bags: each
registered rule and each of its results carry `safety` (and `safetyReason` when unsafe), and an unsafe
rewrite's message says how it changes behaviour.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

from migrate.docs import explain
from migrate.formats.json import tool_version
from migrate.formats.rewrites import rewrite_message
from migrate.report import display_path, ordered, rewrites_of, where
from migrate.results import FileResult, Finding
from migrate.rule_families import get_rule

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
# results that are not about one registered rule
PSEUDO_RULES = {
    "parse-error": "The file (or notebook cell) could not be parsed and was left unchanged.",
    "internal-error": "neuron-migrate failed on this file and left it unchanged; please report it.",
}


def _location(path: str, line: int | None) -> dict:
    shown = display_path(path)
    artifact = (
        {"uri": Path(shown).as_uri()} if shown.startswith("/") else {"uri": quote(shown), "uriBaseId": "%SRCROOT%"}
    )
    location: dict = {"physicalLocation": {"artifactLocation": artifact}}
    if line is not None:
        location["physicalLocation"]["region"] = {"startLine": line}
    return location


def _descriptor(rule_id: str) -> dict:
    rule = get_rule(rule_id)
    if rule is None:
        text = PSEUDO_RULES.get(rule_id, rule_id)
        return {"id": rule_id, "name": rule_id, "shortDescription": {"text": text}}
    return {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.rationale},
        "help": {"text": rule.rationale, "markdown": explain(rule)},
        "defaultConfiguration": {"level": "warning" if rule.todo else "note"},
        "properties": _safety(rule_id),
    }


def _safety(rule_id: str) -> dict:
    """The SARIF property bag of a registered rule's fix safety: `safety` and, when unsafe, `safetyReason`."""
    rule = get_rule(rule_id)
    if rule is None:
        return {}
    return {"safety": rule.safety, **({"safetyReason": rule.safety_reason} if rule.safety_reason else {})}


def render(results: list[FileResult], mode: str) -> str:
    raw: list[tuple[str, str, str, dict, dict]] = []  # (rule id, level, message, location, properties)

    def finding(level: str, result: FileResult, item: Finding) -> None:
        message = item.message if item.cell is None else f"{where(item)}: {item.message}"
        raw.append(
            (
                item.rule,
                level,
                message,
                _location(result.path, item.line if item.cell is None else None),
                _safety(item.rule),
            )
        )

    for r in ordered(results):
        if r.error:
            rule_id = "internal-error" if r.status == "internal-error" else "parse-error"
            raw.append((rule_id, "error", r.error, _location(r.path, r.error_line), {}))
        for rewrite in rewrites_of(r):
            raw.append(
                (
                    rewrite.rule,
                    "error" if mode == "check" else "note",
                    rewrite_message(rewrite, mode),
                    _location(r.path, rewrite.line if rewrite.cell is None else None),
                    _safety(rewrite.rule),
                )
            )
        for todo in r.todos:
            finding("warning", r, todo)
        for note in r.warnings:
            finding("note", r, note)
    rule_ids = sorted({rule_id for rule_id, *_ in raw})
    index = {rule_id: i for i, rule_id in enumerate(rule_ids)}
    document = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "neuron-migrate",
                        "version": tool_version(),
                        "rules": [_descriptor(rule_id) for rule_id in rule_ids],
                    }
                },
                "results": [
                    {
                        "ruleId": rule_id,
                        "ruleIndex": index[rule_id],
                        "level": level,
                        "message": {"text": message},
                        "locations": [location],
                        **({"properties": properties} if properties else {}),
                    }
                    for rule_id, level, message, location, properties in raw
                ],
            }
        ],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
