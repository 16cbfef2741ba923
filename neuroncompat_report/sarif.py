"""SARIF 2.1.0 for code scanning (e.g. github/codeql-action/upload-sarif), from a `Run` of any command.

One result per finding, in the run's order, at its file and line; `tool.driver.rules` lists only the rules
the results cite, in id order, so the output does not change when unrelated rules are added. A registered
rule's fix safety rides in property bags, on the rule and on each of its results (`safety`, and
`safetyReason` when unsafe).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from neuroncompat_report.model import Finding, RuleInfo, Run

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def _location(file: str | None, line: int | None) -> dict[str, Any]:
    shown = file or ""
    artifact = (
        {"uri": Path(shown).as_uri()} if shown.startswith("/") else {"uri": quote(shown), "uriBaseId": "%SRCROOT%"}
    )
    location: dict[str, Any] = {"physicalLocation": {"artifactLocation": artifact}}
    if line is not None:
        location["physicalLocation"]["region"] = {"startLine": line}
    return location


def _safety(rule: RuleInfo | None) -> dict[str, str]:
    if rule is None or rule.safety is None:
        return {}
    return {"safety": rule.safety, **({"safetyReason": rule.safety_reason} if rule.safety_reason else {})}


def _descriptor(rule_id: str, rule: RuleInfo | None) -> dict[str, Any]:
    if rule is None or rule.safety is None:
        return {
            "id": rule_id,
            "name": rule.name if rule else rule_id,
            "shortDescription": {"text": rule.summary if rule else rule_id},
        }
    return {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.rationale},
        "help": {"text": rule.rationale, "markdown": rule.markdown},
        "defaultConfiguration": {"level": rule.level},
        "properties": _safety(rule),
    }


def _result(finding: Finding, index: int, rule: RuleInfo | None) -> dict[str, Any]:
    properties = _safety(rule)
    return {
        "ruleId": finding.rule,
        "ruleIndex": index,
        "level": finding.severity,
        "message": {"text": finding.located_message()},
        "locations": [_location(finding.file, finding.line)],
        **({"properties": properties} if properties else {}),
    }


def render(run: Run) -> str:
    rule_ids = sorted({finding.rule for finding in run.findings})
    index = {rule_id: i for i, rule_id in enumerate(rule_ids)}
    document = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": run.tool,
                        "version": run.version,
                        "rules": [_descriptor(rule_id, run.rules.get(rule_id)) for rule_id in rule_ids],
                    }
                },
                "results": [_result(f, index[f.rule], run.rules.get(f.rule)) for f in run.findings],
            }
        ],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
