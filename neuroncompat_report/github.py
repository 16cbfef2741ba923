"""GitHub Actions workflow commands from findings of any command: annotations on the pull request's diff.

`error` findings become `::error`, `warning` `::warning`, `note` `::notice`, at the finding's file and line,
titled with the rule id and name (`(unsafe)` after a fix that can change behaviour). Values are escaped as the
Actions toolkit does (`%`, CR, LF; plus `:` and `,` in properties).
"""

from __future__ import annotations

from collections.abc import Iterable

from neuroncompat_report.model import Finding, RuleInfo

_LEVELS = {"error": "error", "warning": "warning", "note": "notice"}


def escape(text: str) -> str:
    """A workflow command's data, escaped as the Actions toolkit does (`%`, CR, LF)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return escape(text).replace(":", "%3A").replace(",", "%2C")


def annotation(finding: Finding, rule: RuleInfo | None = None) -> str:
    """One workflow command for `finding`; `rule` names it in the title."""
    title = finding.title or (f"{finding.rule} {rule.name}" if rule else finding.rule)
    if finding.fix is not None and finding.fix.safety == "unsafe":
        title += " (unsafe)"
    props = [f"file={_property(finding.file)}"] if finding.file is not None else []
    if finding.line is not None:
        props.append(f"line={finding.line}")
    props.append(f"title={_property(title)}")
    return f"::{_LEVELS[finding.severity]} {','.join(props)}::{escape(finding.located_message())}\n"


def render(findings: Iterable[Finding], rules: dict[str, RuleInfo]) -> str:
    return "".join(annotation(finding, rules.get(finding.rule)) for finding in findings)
