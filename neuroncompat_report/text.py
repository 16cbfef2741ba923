"""A finding as one line of a text report, the same line in every command's text report.

`severity: file:line: RULE message`: the form `neuron-migrate` lists its TODOs and notes in, and compilers their
diagnostics, so an editor's problem matcher can jump to the line. `(unsafe)` follows the rule id where the fix can
change behaviour (as GitHub annotations title it); a finding without a file (a location in no file the recorder
could name) leaves the place out rather than print a placeholder.
"""

from __future__ import annotations

from neuroncompat_report.model import Finding


def place(finding: Finding) -> str:
    """`file:line`, `file (region)` (a notebook's `cell 3, line 2`), `file`, or "" where it names no file."""
    if finding.file is None:
        return ""
    if finding.region is not None:
        return f"{finding.file} ({finding.region})"
    return finding.file + (f":{finding.line}" if finding.line is not None else "")


def rule_label(finding: Finding) -> str:
    """The rule id, and `(unsafe)` where the finding's fix can change behaviour."""
    unsafe = finding.fix is not None and finding.fix.safety == "unsafe"
    return finding.rule + (" (unsafe)" if unsafe else "")


def line(finding: Finding) -> str:
    """One line, without indentation or newline: each report indents it as its layout needs."""
    where = place(finding)
    return f"{finding.severity}: {where + ': ' if where else ''}{rule_label(finding)} {finding.message}"
