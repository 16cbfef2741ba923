"""The typed records every command reports in: a finding, the rules findings cite, and a run.

A command turns what it found into `Finding`s and one `Run`; the renderers of this package (`sarif` and
`github` for a whole run, `text` and `markdown` for one finding's line) take those, so the same finding reads the
same whoever found it: `neuron-migrate`'s rewrites, TODOs and notes, `check`'s stage findings and `simulate`'s
findings. Each command keeps its own JSON
report and schema (`docs/migrate.schema.json`, `neuroncompat/check/report.schema.json`,
`docs/simulate-report.schema.json`, each generated from its report's types by `neuroncompat_report.schema`): this
model is what the shared formats read, not a replacement for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["error", "warning", "note"]
Safety = Literal["safe", "unsafe"]


@dataclass(frozen=True)
class Fix:
    """A change the tool makes (or would make) for a finding, and whether it keeps what the code does (ruff's
    fix applicability): an unsafe fix says how it changes behaviour, so a reviewer knows what to check."""

    safety: Safety
    safety_reason: str = ""


@dataclass(frozen=True)
class RuleInfo:
    """What a renderer says about a rule a finding cites: its id and name, a one-line summary, the rationale
    (plain and markdown) and the fix safety of registered rules (None for a pseudo-rule such as a parse error)."""

    id: str
    name: str
    summary: str
    rationale: str = ""
    markdown: str = ""
    level: Severity = "note"
    safety: Safety | None = None
    safety_reason: str = ""


@dataclass(frozen=True)
class Finding:
    """One thing a tool reports: which tool, under which rule, how severe, where, what, and the fix if any.

    `file` is as a reviewer reads it (relative to the working directory when inside it); `line` is 1-based, or
    None where the finding has no line in that file: a notebook cell's lines are not the JSON file's, so `region`
    says where it is instead (`cell 3, line 2`). `title` overrides the rule id and name as the annotation's title.
    """

    tool: str
    rule: str
    severity: Severity
    file: str | None
    line: int | None
    message: str
    fix: Fix | None = None
    title: str | None = None
    region: str | None = None

    def located_message(self) -> str:
        """The message, led by the region where there is one: what a format with no place for a region shows."""
        return f"{self.region}: {self.message}" if self.region else self.message


@dataclass(frozen=True)
class Run:
    """One invocation: the tool and version, what it read, its counts and verdict, its time, and its findings
    with the rules they cite (`rules` keyed by id)."""

    tool: str
    version: str
    inputs: tuple[str, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)
    verdict: str = ""
    seconds: float | None = None
    findings: tuple[Finding, ...] = ()
    rules: dict[str, RuleInfo] = field(default_factory=dict)
